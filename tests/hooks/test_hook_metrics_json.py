from __future__ import annotations

import json
from pathlib import Path

import torch

from hookbus import HOOKS, FakeEngine, Priority, SSLEvents
from hookbus.hooks.metrics_json import METRICS_FILE, MetricsJsonHook


def finish_phase(engine: FakeEngine, **fields: object) -> None:
    for name, value in fields.items():
        setattr(engine.state, name, value)
    engine.fire_event(SSLEvents.ON_PHASE_END)


def read_rows(run_dir: Path) -> list[dict]:
    with (run_dir / METRICS_FILE).open() as file:
        return [json.loads(line) for line in file]


def test_registered_with_priority() -> None:
    assert HOOKS.get("metrics_json") is MetricsJsonHook
    assert MetricsJsonHook().priority == Priority.REPORT
    assert MetricsJsonHook().name == "metrics_json"


def test_one_line_per_phase_with_mean_loss_and_metrics(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    finish_phase(
        engine,
        phase_idx=0,
        phase_name="train",
        train=True,
        train_phase_idx=0,
        iteration=4,
        batches=4,
        loss_sum=torch.tensor(6.0),
    )
    finish_phase(
        engine,
        phase_idx=1,
        phase_name="test",
        train=False,
        batches=2,
        loss_sum=torch.tensor(1.0),
        metrics={"knn_top1": 0.5},
    )
    assert read_rows(tmp_path) == [
        {
            "phase_idx": 0,
            "phase": "train",
            "train": True,
            "train_phase_idx": 0,
            "iteration": 4,
            "loss": 1.5,
        },
        {
            "phase_idx": 1,
            "phase": "test",
            "train": False,
            "train_phase_idx": 0,
            "iteration": 4,
            "loss": 0.5,
            "knn_top1": 0.5,
        },
    ]


def test_phase_without_batches_has_null_loss(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    finish_phase(engine, phase_idx=0, phase_name="test", train=False, batches=0)
    assert read_rows(tmp_path)[0]["loss"] is None


def test_appends_to_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text('{"phase_idx": 0}\n')
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    finish_phase(engine, phase_idx=1)
    assert [row["phase_idx"] for row in read_rows(tmp_path)] == [0, 1]


def test_other_ranks_write_nothing(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path, rank=1)
    MetricsJsonHook().attach(engine)
    finish_phase(engine, phase_idx=0)
    assert not (tmp_path / METRICS_FILE).exists()


def start_run_at(engine: FakeEngine, phase_idx: int) -> None:
    """Fire what a (resumed) invocation fires before its first phase's steps."""
    engine.fire_event(SSLEvents.ON_START)
    engine.state.phase_idx = phase_idx
    engine.fire_event(SSLEvents.ON_PHASE_START)


def test_a_resumed_run_drops_the_lines_of_the_phases_it_runs_again(tmp_path: Path) -> None:
    # phases 0-2 finished, then a kill after phase 2's line but before its checkpoint,
    # and a line torn by a kill in the middle of a write
    (tmp_path / METRICS_FILE).write_text(
        '{"phase_idx": 0, "loss": 3.0}\n{"phase_idx": 1, "loss": 2.0}\n'
        '{"phase_idx": 2, "loss": 1.0}\n{"phase_idx": 3, "lo'
    )
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    start_run_at(engine, phase_idx=2)
    assert read_rows(tmp_path) == [{"phase_idx": 0, "loss": 3.0}, {"phase_idx": 1, "loss": 2.0}]
    finish_phase(engine, phase_name="train", batches=1, loss_sum=torch.tensor(0.5))
    engine.state.phase_idx = 3
    engine.fire_event(SSLEvents.ON_PHASE_START)  # later phases keep every line
    finish_phase(engine, batches=1, loss_sum=torch.tensor(0.25))
    assert [(row["phase_idx"], row["loss"]) for row in read_rows(tmp_path)] == [
        (0, 3.0),
        (1, 2.0),
        (2, 0.5),
        (3, 0.25),
    ]


def test_a_fresh_run_in_an_old_directory_starts_a_new_file(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text('{"phase_idx": 0}\n{"phase_idx": 1}\n')
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    start_run_at(engine, phase_idx=0)
    assert (tmp_path / METRICS_FILE).read_text() == ""


def test_a_file_needing_no_change_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    path.write_text('{"phase_idx": 0}\n')
    before = path.stat().st_ino
    engine = FakeEngine(run_dir=tmp_path)
    MetricsJsonHook().attach(engine)
    start_run_at(engine, phase_idx=1)
    assert path.stat().st_ino == before
    assert read_rows(tmp_path) == [{"phase_idx": 0}]


def test_other_ranks_leave_the_file_alone(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text('{"phase_idx": 0}\n{"phase_idx": 1}\n')
    engine = FakeEngine(run_dir=tmp_path, rank=1)
    MetricsJsonHook().attach(engine)
    start_run_at(engine, phase_idx=0)
    assert [row["phase_idx"] for row in read_rows(tmp_path)] == [0, 1]

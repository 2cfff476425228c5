from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.events import SSLEvents
from engine.testing import FakeEngine
from hooks import HOOKS
from hooks.metrics_json import METRICS_FILE, MetricsJsonHook


def finish_phase(engine: FakeEngine, **fields: object) -> None:
    for name, value in fields.items():
        setattr(engine.state, name, value)
    engine.fire_event(SSLEvents.ON_PHASE_END)


def read_rows(run_dir: Path) -> list[dict]:
    with (run_dir / METRICS_FILE).open() as file:
        return [json.loads(line) for line in file]


def test_registered_with_priority() -> None:
    assert HOOKS.get("metrics_json") is MetricsJsonHook
    assert MetricsJsonHook().priority == 30
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

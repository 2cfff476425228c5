"""The final summary of ``hookbus train``, recorded by RunSummary on the fake engine."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from hookbus import FakeEngine, SSLEvents
from hookbus.run_summary import RunSummary
from tests.hook_stubs import Phase

PLAN = [Phase(True, 3), Phase(False, 1), Phase(True, 3), Phase(False, 1)]


def run_phases(engine: FakeEngine, first: int) -> None:
    engine.fire_event(SSLEvents.ON_START)
    for index in range(first, len(PLAN)):
        state = engine.state
        state.phase_idx, state.train = index, PLAN[index].train
        state.phase_name = "train" if state.train else "test"
        state.batches, state.loss_sum = 0, None
        engine.fire_event(SSLEvents.ON_PHASE_START)
        for _ in range(PLAN[index].length):
            state.loss = torch.tensor(2.0)
            state.loss_sum = state.loss if state.loss_sum is None else state.loss_sum + state.loss
            engine.step()
        state.metrics = {} if state.train else {"knn_top1": 0.5}
        engine.fire_event(SSLEvents.ON_PHASE_END)


def test_a_fresh_run_names_every_phase_its_iterations_and_results(tmp_path: Path) -> None:
    engine = FakeEngine(phases=PLAN, max_iterations=6, run_dir=tmp_path)
    summary = RunSummary().attach(engine)
    run_phases(engine, first=0)
    lines = summary.lines(engine.state)
    assert re.fullmatch(
        r"done: 4 phases run \(1-4 of 4, fresh start\); 6 train iterations \(6/6 in all\); "
        r"wall time 0:00:0\d",
        lines[0],
    )
    assert lines[1:3] == [
        "last train phase: mean loss 2.0000",
        "last test phase: mean loss 2.0000, knn_top1 0.5000",
    ]
    assert lines[3] == f"files in {tmp_path}: none yet"


def test_a_resumed_run_counts_from_the_first_phase_it_runs(tmp_path: Path) -> None:
    engine = FakeEngine(
        phases=PLAN, max_iterations=6, iteration=3, run_dir=tmp_path, resumed_from="ckpt"
    )
    summary = RunSummary().attach(engine)
    run_phases(engine, first=2)
    assert summary.lines(engine.state)[0].startswith(
        "done: 2 phases run (3-4 of 4, resumed from ckpt); 3 train iterations (6/6 in all)"
    )


def test_a_finished_run_says_nothing_was_left(tmp_path: Path) -> None:
    engine = FakeEngine(phases=PLAN, run_dir=tmp_path)
    summary = RunSummary().attach(engine)
    assert summary.lines(engine.state)[0] == (
        f"done: nothing left to train; {tmp_path} holds the final checkpoint"
    )


def test_the_files_line_counts_checkpoints_and_names_the_newest(tmp_path: Path) -> None:
    for name in ("config.yaml", "phase00001_batch0000003.torch", "phase00003_batch0000001.torch"):
        (tmp_path / name).write_text("x")
        (tmp_path / f"{name}.sha256").write_text("x")
    (tmp_path / ".phase00005_batch0000001.torch.tmp-1").write_text("x")
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "checkpoint.torch").symlink_to("phase00003_batch0000001.torch")
    engine = FakeEngine(phases=PLAN, run_dir=tmp_path)
    assert RunSummary().lines(engine.state)[-1] == (
        f"files in {tmp_path}: config.yaml, tensorboard/, "
        "checkpoint.torch -> phase00003_batch0000001.torch (2 kept)"
    )

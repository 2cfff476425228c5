"""CheckpointHook against the fake engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from hookbus import Config, FakeEngine, Hook, SSLEvents
from hookbus.engine.bus.phases import Phase
from hookbus.engine.checkpoint.checkpoint_io import (
    POINTER_NAME,
    checkpoint_name,
    list_checkpoints,
    load_checkpoint,
)
from hookbus.hooks.checkpoint import CheckpointHook


class Counter(Hook):
    def __init__(self) -> None:
        super().__init__()
        self.count = 5

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}


def _engine(**fields: Any) -> FakeEngine:
    model = torch.nn.Linear(2, 2)
    values: dict[str, Any] = {
        "cfg": Config(),
        "phases": [Phase("train", True, 4), Phase("test", False, 1), Phase("train", True, 4)],
        "phase_idx": 0,
        "train_phase_idx": 0,
        "phase_length": 4,
        "base_model": model,
        "model": model,
        "loss_fn": torch.nn.Identity(),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "hooks": [Counter()],
    }
    values.update(fields)
    return FakeEngine(**values)


def test_iteration_checkpoints_every_n_train_iterations(tmp_path: Path) -> None:
    engine = _engine()
    CheckpointHook(tmp_path, phase_frequency=0, iter_frequency=2, keep_last=5).attach(engine)
    for _ in range(3):
        engine.step()
    assert [p.name for p in list_checkpoints(tmp_path)] == [checkpoint_name(0, 2)]
    saved = load_checkpoint(tmp_path / POINTER_NAME)
    assert saved["phase_done"] is False
    assert saved["phase_batches"] == 2
    assert saved["iteration"] == 2


def test_no_iteration_checkpoint_in_test_phases(tmp_path: Path) -> None:
    engine = _engine(train=False, phase_idx=1)
    CheckpointHook(tmp_path, phase_frequency=0, iter_frequency=1).attach(engine)
    engine.step()
    assert list_checkpoints(tmp_path) == []


def test_phase_checkpoint_carries_the_required_keys_and_hook_state(tmp_path: Path) -> None:
    engine = _engine(iteration=4, batches=4)
    CheckpointHook(tmp_path).attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    saved = load_checkpoint(tmp_path / POINTER_NAME)
    for key in ("phase_idx", "train_phase_idx", "iteration", "iteration_num", "model", "optimizer"):
        assert key in saved
    assert saved["hooks"] == {"counter": {"count": 5}}
    assert saved["phase_done"] is True
    assert torch.equal(saved["model"]["weight"], engine.state.base_model.weight)


def test_phase_frequency_skips_phases(tmp_path: Path) -> None:
    engine = _engine()
    CheckpointHook(tmp_path, phase_frequency=2).attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)  # train phase 0: not due
    assert list_checkpoints(tmp_path) == []
    engine.state.phase_idx, engine.state.train_phase_idx = 2, 1
    engine.fire_event(SSLEvents.ON_PHASE_END)  # train phase 1: due, and the last phase
    assert [p.name for p in list_checkpoints(tmp_path)] == [checkpoint_name(2, 0)]


def test_last_phase_is_always_checkpointed(tmp_path: Path) -> None:
    engine = _engine(phases=[Phase("test", False, 1)], train=False)
    CheckpointHook(tmp_path, phase_frequency=0).attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert load_checkpoint(tmp_path / POINTER_NAME)["phase_done"] is True


def test_keeps_only_the_last_checkpoints(tmp_path: Path) -> None:
    engine = _engine()
    CheckpointHook(tmp_path, phase_frequency=0, iter_frequency=1, keep_last=2).attach(engine)
    for _ in range(3):
        engine.step()
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        checkpoint_name(0, 2),
        checkpoint_name(0, 3),
    ]
    assert os.readlink(tmp_path / POINTER_NAME) == checkpoint_name(0, 3)


def test_other_ranks_write_nothing(tmp_path: Path) -> None:
    engine = _engine(rank=1)
    CheckpointHook(tmp_path).attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert not tmp_path.joinpath(POINTER_NAME).exists()

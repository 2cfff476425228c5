"""Process settings a run applies: deterministic algorithms on request, and never leaked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from ignite.engine import Engine

from engine import SSLTrainer
from engine.hook import Hook
from tests.conftest import tiny_config


class DeterminismSeen(Hook):
    """Records whether deterministic algorithms were on when the run started."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: bool | None = None

    def on_start(self, engine: Engine) -> None:
        self.seen = torch.are_deterministic_algorithms_enabled()


@pytest.fixture(autouse=True)
def _determinism_restored() -> Iterator[None]:
    yield
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False


def test_deterministic_runs_train_alike_and_the_setting_does_not_leak(tmp_path: Path) -> None:
    states, seen = [], []
    for name, deterministic in (("a", True), ("b", True), ("c", False)):
        cfg = tiny_config(
            tmp_path / name, optimizer={"num_epochs": 1}, machine={"deterministic": deterministic}
        )
        recorder = DeterminismSeen()
        states.append(SSLTrainer(cfg, hooks=[recorder]).train().base_model.state_dict())
        seen.append(recorder.seen)
    assert seen == [True, True, False]
    assert torch.backends.cudnn.deterministic is False
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])

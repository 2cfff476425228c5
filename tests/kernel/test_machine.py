"""Process settings a run applies: deterministic algorithms on request, and never leaked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer
from hookbus.engine.process.machine import ProcessSettings, current_settings, flush_denormal_enabled
from tests.conftest import tiny_config


class SettingsSeen(Hook):
    """Records the process settings at the start of the run; fails at its end when
    ``fail`` is set."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.seen: ProcessSettings | None = None

    def on_start(self, engine: Engine) -> None:
        self.seen = current_settings()

    def on_end(self, engine: Engine) -> None:
        if self.fail:
            raise RuntimeError("failing at on_end")


@pytest.mark.slow
def test_deterministic_runs_train_alike_and_the_setting_does_not_leak(tmp_path: Path) -> None:
    states, seen = [], []
    for name, deterministic in (("a", True), ("b", True), ("c", False)):
        cfg = tiny_config(
            tmp_path / name, optimizer={"num_epochs": 1}, machine={"deterministic": deterministic}
        )
        recorder = SettingsSeen()
        states.append(SSLTrainer(cfg, hooks=[recorder]).train().base_model.state_dict())
        assert recorder.seen is not None
        seen.append(recorder.seen.deterministic)
    assert seen == [True, True, False]
    assert torch.backends.cudnn.deterministic is False
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_flush_denormal_is_read_from_the_floating_point_unit() -> None:
    try:
        torch.set_flush_denormal(True)
        assert flush_denormal_enabled()
    finally:
        torch.set_flush_denormal(False)
    assert not flush_denormal_enabled()


@pytest.mark.parametrize("fail", [False, True])
def test_a_run_puts_the_process_settings_back_when_it_ends(tmp_path: Path, fail: bool) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        cfg = tiny_config(
            tmp_path / "run",
            optimizer={"num_epochs": 1},
            machine={"flush_denormal": True, "num_threads": 1, "deterministic": True},
        )
        recorder = SettingsSeen(fail=fail)
        trainer = SSLTrainer(cfg, hooks=[recorder])
        if fail:
            with pytest.raises(RuntimeError, match="failing at on_end"):
                trainer.train()
        else:
            trainer.train()
        assert recorder.seen is not None
        assert recorder.seen[:3] == (True, 1, True)
        assert current_settings()[:3] == (False, 2, False)
        assert sys.float_info.min / 2 > 0  # the caller's denormals survive again
    finally:
        torch.set_num_threads(threads)

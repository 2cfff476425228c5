"""A finished run is never changed by accident: a rerun whose config differs is refused
with the difference and the flag that allows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ignite.engine import Engine

from hookbus import ConfigError, Hook, Priority, SSLTrainer, default_hooks
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from tests.conftest import tiny_config

ONE_EPOCH = {"num_epochs": 1, "warmup_epochs": 0}
FAST = [
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=100",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.tensorboard.enabled=false",
    "hooks.summary_plot.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
]


def finished(run: Path) -> Path:
    """A tiny run of one epoch, finished; returns its newest checkpoint."""
    SSLTrainer(tiny_config(run, optimizer=ONE_EPOCH)).train()
    found = newest_valid_checkpoint(run)
    assert found is not None
    return found[0]


def test_a_rerun_with_more_epochs_is_refused_naming_the_change_and_the_flag(
    tmp_path: Path,
) -> None:
    before = finished(tmp_path / "run")
    longer = tiny_config(tmp_path / "run", optimizer={**ONE_EPOCH, "num_epochs": 2})
    with pytest.raises(ConfigError) as error:
        SSLTrainer(longer).train()
    message = str(error.value)
    assert "is finished (1 epochs)" in message
    assert "optimizer.num_epochs: 1 -> 2" in message
    assert "checkpoint.change_finished=true" in message
    assert newest_valid_checkpoint(tmp_path / "run")[0] == before


def test_a_rerun_with_another_safe_setting_is_refused_too(tmp_path: Path) -> None:
    finished(tmp_path / "run")
    other = tiny_config(tmp_path / "run", optimizer={**ONE_EPOCH, "lr": 0.01})
    with pytest.raises(ConfigError, match=r"optimizer\.lr: 0\.001 -> 0\.01\. A finished run"):
        SSLTrainer(other).train()


def test_the_same_config_again_trains_nothing(tmp_path: Path) -> None:
    before = finished(tmp_path / "run")
    state = SSLTrainer(tiny_config(tmp_path / "run", optimizer=ONE_EPOCH)).train()
    assert state.iteration == 3
    assert newest_valid_checkpoint(tmp_path / "run")[0] == before


def test_the_flag_lets_a_finished_run_go_on(tmp_path: Path) -> None:
    finished(tmp_path / "run")
    longer = tiny_config(
        tmp_path / "run",
        optimizer={**ONE_EPOCH, "num_epochs": 2},
        checkpoint={"change_finished": True},
    )
    assert SSLTrainer(longer).train().iteration == 6


class CrashAfterFirstEpoch(Hook):
    """Raises after the first train phase's checkpoint: a run that did not finish."""

    priority = Priority.LAST

    def on_phase_end(self, engine: Engine) -> None:
        if engine.state.train_phase_idx == 0 and engine.state.train:
            raise RuntimeError("crash")


def test_a_run_that_did_not_finish_goes_on_without_the_flag(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={**ONE_EPOCH, "num_epochs": 2})
    with pytest.raises(RuntimeError, match="crash"):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), CrashAfterFirstEpoch()]).train()
    faster = tiny_config(tmp_path / "run", optimizer={**ONE_EPOCH, "num_epochs": 2, "lr": 0.01})
    state = SSLTrainer(faster).train()
    assert state.resumed_from is not None
    assert state.iteration == 6


def test_the_command_refuses_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = ["train", "simclr_digits", f"checkpoint.dir={tmp_path}", *FAST]
    assert main([*train, "-q"]) == 0
    capsys.readouterr()
    assert main([*train, "optimizer.num_epochs=2", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hookbus train: error: the run of checkpoint ")
    assert "optimizer.num_epochs: 1 -> 2" in err
    assert err.count("\n") == 1

"""Failure paths: non-finite loss, a full disk, a checkpoint of another model."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

import hookbus.engine.checkpoint.checkpoint_io as checkpoint_io
from hookbus import CheckpointError, ConfigError, Hook, SSLTrainer, default_hooks
from hookbus.engine.checkpoint.checkpoint_io import (
    list_checkpoints,
    load_checkpoint,
    newest_valid_checkpoint,
    save_atomic,
)
from hookbus.engine.errors import CheckpointWriteError
from hookbus.hooks.nan_check import NonFiniteLossError
from tests.conftest import tiny_config
from tests.failure_hooks import PoisonOutput


def test_non_finite_loss_stops_naming_the_iteration_and_keeps_the_last_checkpoint(
    tmp_path: Path,
) -> None:
    cfg = tiny_config(tmp_path / "run", checkpoint={"iter_frequency": 1, "keep_last": 3})
    with pytest.raises(NonFiniteLossError, match="loss is nan at train iteration 5"):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), PoisonOutput(5)]).train()
    _, checkpoint = newest_valid_checkpoint(cfg.checkpoint.dir)
    assert checkpoint["iteration"] == 4
    assert all(torch.isfinite(value).all() for value in checkpoint["model"].values())


def test_full_disk_reports_the_error_and_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    checkpoint_writes = []

    def fsync_until_the_disk_fills(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if ".torch.tmp-" in name and "sha256" not in name:
            checkpoint_writes.append(name)
            if len(checkpoint_writes) > 1:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(checkpoint_io.os, "fsync", fsync_until_the_disk_fills)
    cfg = tiny_config(tmp_path / "run", checkpoint={"iter_frequency": 1})
    with pytest.raises(CheckpointWriteError, match="No space left on device; the previous"):
        SSLTrainer(cfg).train()
    monkeypatch.undo()
    run = cfg.checkpoint.dir
    assert [p.name for p in list_checkpoints(run)] == ["phase00000_batch0000001.torch"]
    assert newest_valid_checkpoint(run)[1]["iteration"] == 1
    assert not [p for p in os.listdir(run) if ".tmp-" in p]


def test_checkpoint_of_another_model_shape_names_the_changed_keys(tmp_path: Path) -> None:
    run = tmp_path / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1})).train()
    wider = tiny_config(
        run,
        optimizer={"num_epochs": 2},
        model={"backbone": {"width": 8}, "head": {"dims": [32, 16, 8]}},
    )
    with pytest.raises(ConfigError, match="cannot change in a resumed run") as error:
        SSLTrainer(wider).train()
    assert "model.backbone.width: 4 -> 8" in str(error.value)
    assert "model.head.dims: [16, 16, 8] -> [32, 16, 8]" in str(error.value)


def test_checkpoint_without_its_config_names_the_mismatched_weights(tmp_path: Path) -> None:
    run = tmp_path / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1})).train()
    for path in list_checkpoints(run):
        checkpoint = load_checkpoint(path)
        del checkpoint["config"]  # as a checkpoint made by hand would be
        save_atomic(checkpoint, path)
    wider = tiny_config(
        run,
        optimizer={"num_epochs": 2},
        model={"backbone": {"width": 8}, "head": {"dims": [32, 16, 8]}},
    )
    with pytest.raises(CheckpointError, match="does not fit this model") as error:
        SSLTrainer(wider).train()
    assert "backbone.layers.0.weight: (4, 1, 3, 3) vs (8, 1, 3, 3)" in str(error.value)


def test_checkpoint_hook_state_restores_by_name(tmp_path: Path, caplog: Any) -> None:
    class Tally(Hook):
        def __init__(self) -> None:
            super().__init__()
            self.steps = 0

        def on_step(self, engine: Engine) -> None:
            self.steps += 1

        def state_dict(self) -> dict[str, Any]:
            return {"steps": self.steps}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.steps = state["steps"]

    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1})
    SSLTrainer(cfg, hooks=[*default_hooks(cfg), Tally()]).train()
    tally = Tally()
    cfg2 = tiny_config(run, optimizer={"num_epochs": 2}, checkpoint={"change_finished": True})
    SSLTrainer(cfg2, hooks=[*default_hooks(cfg2), tally]).train()
    assert tally.steps == 8  # 4 steps per epoch (3 train + 1 test), 2 epochs

"""Failure paths through the command line: exit status and one line on stderr.

A non-finite loss and a full disk end ``hookbus train`` with status 1, a checkpoint of
another model with status 2 (a user error); each prints one line naming the cause and
no traceback.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
import torch

import hookbus.engine.checkpoint.checkpoint_io as checkpoint_io
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import list_checkpoints, newest_valid_checkpoint
from hookbus.engine.process.distributed import collective_failure

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "configs" / "simclr_digits.yaml")
FAST = [
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=100",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.tensorboard.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.slow
def test_non_finite_loss_exits_1_naming_the_iteration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poison = [
        "trainer.imports=[tests.failure_hooks]",
        "hooks.extra=[{name: poison_output, params: {at_iteration: 3}}]",
    ]
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *FAST, *poison, "-q"]) == 1
    # The default check runs at log steps: the phase end finds the bad step.
    assert one_line(capsys) == (
        "hookbus train: error: loss is nan at train iteration 3, phase 1/1 (train), step 3/5"
    )
    assert list_checkpoints(tmp_path) == []


def test_infinite_optimizer_state_exits_1_before_it_is_checkpointed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poison = [
        "trainer.imports=[tests.failure_hooks]",
        "hooks.extra=[{name: poison_optimizer_state, params: {at_iteration: 3}}]",
        "checkpoint.iter_frequency=1",
    ]
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *FAST, *poison, "-q"]) == 1
    assert re.fullmatch(
        r"hookbus train: error: optimizer state '\w+' of backbone\.\S+ "
        r"holds inf after train iteration 3",
        one_line(capsys),
    )
    assert capsys.readouterr().err == ""
    assert newest_valid_checkpoint(tmp_path)[1]["iteration"] == 2


def test_a_diverged_loss_exits_1_naming_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "train",
                RECIPE,
                f"checkpoint.dir={tmp_path}",
                *FAST,
                "hooks.nan_check.max_loss=0.5",
                "-q",
            ]
        )
        == 1
    )
    assert one_line(capsys).startswith("hookbus train: error: loss is ")
    assert list_checkpoints(tmp_path) == []


def test_full_disk_exits_1_and_keeps_the_previous_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *FAST, "-q"]) == 0
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        if ".torch.tmp-" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(checkpoint_io.os, "fsync", full_disk)
    more = [arg for arg in FAST if not arg.startswith("optimizer.num_epochs")]
    more += ["optimizer.num_epochs=2", "checkpoint.change_finished=true"]
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *more, "-q"]) == 1
    monkeypatch.undo()
    err = one_line(capsys)
    assert err.startswith("hookbus train: error: ")
    assert "No space left on device" in err
    assert newest_valid_checkpoint(tmp_path)[1]["train_phase_idx"] == 0
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]


def test_checkpoint_of_another_model_exits_2_naming_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *FAST, "-q"]) == 0
    wider = [*FAST, "model.backbone.width=16", "model.head.dims=[64,32,16]"]
    wider.append("optimizer.num_epochs=2")
    assert main(["train", RECIPE, f"checkpoint.dir={tmp_path}", *wider, "-q"]) == 2
    err = one_line(capsys)
    assert "cannot change in a resumed run" in err
    assert "model.backbone.width: 8 -> 16" in err


def test_collective_failures_are_told_apart_from_other_runtime_errors() -> None:
    assert collective_failure(RuntimeError("Timed out waiting")) is None  # one process
    told = collective_failure(torch.distributed.DistError("Timed out waiting 5000ms"))
    assert told is not None
    assert told.startswith("rank 0: a collective across ranks failed (another rank died")
    assert told.endswith(": Timed out waiting 5000ms")

"""Checkpoint files: atomic writes, the newest pointer, rotation and safe loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from engine.checkpoint_io import (
    FORMAT,
    POINTER_NAME,
    checkpoint_name,
    list_checkpoints,
    load_checkpoint,
    newest_checkpoint,
    point_to_newest,
    remove_old,
    save_atomic,
)
from engine.errors import CheckpointError


def _checkpoint(step: int) -> dict:
    return {
        "format": FORMAT,
        "phase_idx": 0,
        "train_phase_idx": 0,
        "iteration": step,
        "iteration_num": step,
        "model": {"w": torch.full((2,), float(step))},
        "optimizer": {},
        "hooks": {},
    }


def test_saved_checkpoint_loads_back(tmp_path: Path) -> None:
    save_atomic(_checkpoint(3), tmp_path / "a.torch")
    loaded = load_checkpoint(tmp_path / "a.torch")
    assert loaded["iteration"] == 3
    assert torch.equal(loaded["model"]["w"], torch.tensor([3.0, 3.0]))


def test_save_leaves_no_temporary_file(tmp_path: Path) -> None:
    save_atomic(_checkpoint(1), tmp_path / "a.torch")
    assert sorted(os.listdir(tmp_path)) == ["a.torch"]


def test_failed_save_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "a.torch"
    save_atomic(_checkpoint(1), path)
    with pytest.raises(Exception):  # noqa: B017 - any pickling error
        save_atomic({"bad": lambda: None}, path)
    assert load_checkpoint(path)["iteration"] == 1
    assert sorted(os.listdir(tmp_path)) == ["a.torch"]


def test_pointer_follows_the_newest_and_rotation_keeps_the_last(tmp_path: Path) -> None:
    for step in range(4):
        name = checkpoint_name(step, 5)
        save_atomic(_checkpoint(step), tmp_path / name)
        point_to_newest(tmp_path, name)
        remove_old(tmp_path, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        checkpoint_name(2, 5),
        checkpoint_name(3, 5),
    ]
    assert load_checkpoint(newest_checkpoint(tmp_path))["iteration"] == 3
    assert os.readlink(tmp_path / POINTER_NAME) == checkpoint_name(3, 5)


def test_no_checkpoint_means_none(tmp_path: Path) -> None:
    assert newest_checkpoint(tmp_path) is None


def test_dangling_pointer_is_an_error(tmp_path: Path) -> None:
    os.symlink("gone.torch", tmp_path / POINTER_NAME)
    with pytest.raises(CheckpointError, match="points to a missing file"):
        newest_checkpoint(tmp_path)


def test_truncated_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.torch"
    save_atomic(_checkpoint(1), path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="cannot load checkpoint"):
        load_checkpoint(path)


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.torch"
    torch.save({"w": torch.zeros(1)}, path)
    with pytest.raises(CheckpointError, match="not a hookbus checkpoint"):
        load_checkpoint(path)


class _Payload:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch PWNED",))


def test_pickled_code_is_refused_and_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.torch"
    torch.save({**_checkpoint(1), "extra": _Payload()}, path)
    with pytest.raises(CheckpointError, match="cannot load checkpoint"):
        load_checkpoint(path)
    assert not (tmp_path / "PWNED").exists()


def test_missing_keys_are_named(tmp_path: Path) -> None:
    path = tmp_path / "a.torch"
    checkpoint = _checkpoint(1)
    del checkpoint["optimizer"]
    save_atomic(checkpoint, path)
    with pytest.raises(CheckpointError, match=r"lacks the keys \['optimizer'\]"):
        load_checkpoint(path)

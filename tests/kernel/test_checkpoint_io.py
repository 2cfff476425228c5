"""Checkpoint files: atomic writes, the newest pointer, rotation and safe loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from hookbus import CheckpointError
from hookbus.engine.checkpoint import checkpoint_io
from hookbus.engine.checkpoint.checkpoint_io import (
    FORMAT,
    POINTER_NAME,
    checkpoint_name,
    checksum_path,
    list_checkpoints,
    load_checkpoint,
    newest_valid_checkpoint,
    point_to_newest,
    remove_old,
    remove_stale_temporaries,
    save_atomic,
    write_bytes_atomic,
)


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


def test_save_writes_the_file_and_its_checksum_only(tmp_path: Path) -> None:
    save_atomic(_checkpoint(1), tmp_path / "a.torch")
    assert sorted(os.listdir(tmp_path)) == ["a.torch", "a.torch.sha256"]


def test_failed_save_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "a.torch"
    save_atomic(_checkpoint(1), path)
    with pytest.raises(Exception):  # noqa: B017 - any pickling error
        save_atomic({"bad": lambda: None}, path)
    assert load_checkpoint(path)["iteration"] == 1
    assert sorted(os.listdir(tmp_path)) == ["a.torch", "a.torch.sha256"]


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
    path, newest = newest_valid_checkpoint(tmp_path)
    assert (path.name, newest["iteration"]) == (checkpoint_name(3, 5), 3)
    assert os.readlink(tmp_path / POINTER_NAME) == checkpoint_name(3, 5)


def test_no_checkpoint_means_none(tmp_path: Path) -> None:
    assert newest_valid_checkpoint(tmp_path) is None


def _write_series(directory: Path, steps: range) -> list[Path]:
    paths = []
    for step in steps:
        path = directory / checkpoint_name(0, step)
        save_atomic(_checkpoint(step), path)
        point_to_newest(directory, path.name)
        paths.append(path)
    return paths


def test_corrupt_newest_is_skipped_for_the_previous_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, newest = _write_series(tmp_path, range(1, 3))
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    path, checkpoint = newest_valid_checkpoint(tmp_path)
    assert (path.name, checkpoint["iteration"]) == (checkpoint_name(0, 1), 1)
    assert f"skipping checkpoint {newest}" in caplog.text
    assert "does not match its SHA-256" in caplog.text


def test_a_zero_byte_newest_with_its_checksum_file_is_skipped_for_the_previous_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, newest = _write_series(tmp_path, range(1, 3))
    newest.write_bytes(b"")
    assert checksum_path(newest).stat().st_size > 0
    path, checkpoint = newest_valid_checkpoint(tmp_path)
    assert (path.name, checkpoint["iteration"]) == (checkpoint_name(0, 1), 1)
    assert f"skipping checkpoint {newest}" in caplog.text


def test_a_write_removes_what_a_killed_writer_of_the_file_left_and_keeps_a_live_ones(
    tmp_path: Path,
) -> None:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    dead = tmp_path / f".out.pth.tmp-{pid_max + 1}"
    live = tmp_path / f".out.pth.tmp-{os.getppid()}"
    other = tmp_path / f".other.pth.tmp-{pid_max + 1}"
    for leftover in (dead, live, other):
        leftover.write_bytes(b"half")
    write_bytes_atomic(tmp_path / "out.pth", b"whole")
    assert sorted(os.listdir(tmp_path)) == sorted(["out.pth", live.name, other.name])
    assert (tmp_path / "out.pth").read_bytes() == b"whole"


def test_checkpoint_without_its_checksum_is_not_trusted(tmp_path: Path) -> None:
    _, newest = _write_series(tmp_path, range(1, 3))
    checksum_path(newest).unlink()
    path, _ = newest_valid_checkpoint(tmp_path)
    assert path.name == checkpoint_name(0, 1)


def test_truncated_newest_is_skipped(tmp_path: Path) -> None:
    _, newest = _write_series(tmp_path, range(1, 3))
    newest.write_bytes(newest.read_bytes()[:-10])
    path, _ = newest_valid_checkpoint(tmp_path)
    assert path.name == checkpoint_name(0, 1)


def test_dangling_pointer_falls_back_to_the_files(tmp_path: Path) -> None:
    _write_series(tmp_path, range(1, 2))
    (tmp_path / POINTER_NAME).unlink()
    os.symlink("gone.torch", tmp_path / POINTER_NAME)
    path, _ = newest_valid_checkpoint(tmp_path)
    assert path.name == checkpoint_name(0, 1)


def test_no_valid_checkpoint_is_an_error_naming_them(tmp_path: Path) -> None:
    [only] = _write_series(tmp_path, range(1, 2))
    only.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=f"no valid checkpoint in {tmp_path}"):
        newest_valid_checkpoint(tmp_path)


def test_stale_temporaries_are_removed(tmp_path: Path) -> None:
    _write_series(tmp_path, range(1, 2))
    stale = tmp_path / f".{checkpoint_name(0, 2)}.tmp-12345"
    stale.write_bytes(b"half")
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert not stale.exists()


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


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after the write that raises it runs."""


@pytest.mark.parametrize("earlier", [0, 1, 2], ids=["first", "second", "third"])
def test_a_kill_between_the_sidecar_and_the_checkpoint_leaves_a_resumable_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: int
) -> None:
    # The sidecar is written first: a kill before the checkpoint itself is in place
    # leaves no checkpoint without its sidecar, so a resume goes on from the newest
    # whole one (none before the run's first: a fresh start), never refusing the folder.
    _write_series(tmp_path, range(1, earlier + 1))
    real = checkpoint_io.write_bytes_atomic
    writes: list[Path] = []

    def killed_after_the_first(path: Path, data: bytes) -> None:
        if writes:
            raise Killed
        writes.append(path)
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "write_bytes_atomic", killed_after_the_first)
    path = tmp_path / checkpoint_name(0, earlier + 1)
    with pytest.raises(Killed):
        save_atomic(_checkpoint(earlier + 1), path)
    assert writes == [checksum_path(path)] and not path.exists()
    found = newest_valid_checkpoint(tmp_path)
    if earlier:
        assert found is not None and found[1]["iteration"] == earlier
    else:
        assert found is None

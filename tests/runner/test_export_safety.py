"""``hookbus export`` never destroys a run's files and never reports a write it did not do:
a destination that is the source or a file a run keeps (by any path) is refused, exit 2;
a FIFO or a device is refused without waiting on it; a write that fails is one line,
exit 1, nothing left behind."""

from __future__ import annotations

import os
import shutil
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import (
    POINTER_NAME,
    checksum_path,
    list_checkpoints,
    verify_checksum,
)
from hookbus.hooks.checkpoint import CheckpointHook
from tests.conftest import tiny_config
from tests.disk_mounts import small_tmpfs


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-epoch run with its checkpoints, link, sidecars and run files."""
    run = tmp_path_factory.mktemp("trained") / "run"
    cfg = tiny_config(run)
    SSLTrainer(cfg, hooks=[CheckpointHook.from_config(cfg)]).train()
    return run


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained run (its link kept) that a test may try to damage."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy, symlinks=True)
    return copy


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging when the body waits longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry of ``folder``: a link's target, a file's bytes."""
    return {
        path.name: os.readlink(path) if path.is_symlink() else path.read_bytes()
        for path in sorted(folder.iterdir())
        if not path.is_dir()
    }


def export(source: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``hookbus export source out``: the exit status and stderr's lines joined."""
    with within(20):
        status = main(["export", str(source), str(out)])
    return status, capsys.readouterr().err.strip()


def assert_refused(status: int, err: str, *paths: Path) -> None:
    assert status == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("hookbus export: error: ")
    for path in paths:
        assert str(path) in err


def test_the_checkpoint_itself_is_refused_and_stays_intact(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newest = list_checkpoints(run)[-1]
    before = snapshot(run)
    status, err = export(newest, newest, capsys)
    assert_refused(status, err, newest)
    assert "is the input file" in err
    assert snapshot(run) == before
    verify_checksum(newest)


def test_the_checkpoint_link_as_source_and_destination_is_refused(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(run)
    status, err = export(run / POINTER_NAME, run / POINTER_NAME, capsys)
    assert_refused(status, err, run / POINTER_NAME)
    assert snapshot(run) == before
    assert (run / POINTER_NAME).is_symlink()


def test_the_checkpoint_link_as_destination_of_an_older_checkpoint_is_refused(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    oldest = list_checkpoints(run)[0]
    before = snapshot(run)
    status, err = export(oldest, run / POINTER_NAME, capsys)
    assert_refused(status, err, run / POINTER_NAME)
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "name", ["sidecar", "config.yaml", "metrics.json", "log.txt", ".hookbus.lock", "other"]
)
def test_a_file_the_run_keeps_is_refused_as_destination(
    run: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    newest = list_checkpoints(run)[-1]
    target = {"sidecar": checksum_path(newest), "other": list_checkpoints(run)[0]}.get(
        name, run / name
    )
    before = snapshot(run)
    status, err = export(newest, target, capsys)
    assert_refused(status, err, target)
    assert snapshot(run) == before


def test_a_hard_link_to_the_checkpoint_elsewhere_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newest = list_checkpoints(run)[-1]
    hard = tmp_path / "elsewhere" / "backup.torch"
    hard.parent.mkdir()
    os.link(newest, hard)
    status, err = export(run / POINTER_NAME, hard, capsys)
    assert_refused(status, err, hard)
    assert os.stat(hard).st_ino == os.stat(newest).st_ino
    verify_checksum(newest)


def test_a_hard_link_to_the_run_config_elsewhere_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hard = tmp_path / "my_config_copy.yaml"
    os.link(run / "config.yaml", hard)
    status, err = export(run / POINTER_NAME, hard, capsys)
    assert_refused(status, err, hard, run / "config.yaml")


def test_a_symbolic_link_to_a_run_file_is_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "weights.pth"
    link.symlink_to(run / "metrics.json")
    before = snapshot(run)
    status, err = export(run / POINTER_NAME, link, capsys)
    assert_refused(status, err, link, run / "metrics.json")
    assert link.is_symlink()
    assert snapshot(run) == before


def test_a_dotdot_path_to_a_run_file_is_refused(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "sub").mkdir()
    target = run / "sub" / ".." / "log.txt"
    before = snapshot(run)
    status, err = export(run / POINTER_NAME, target, capsys)
    assert_refused(status, err, target)
    assert snapshot(run) == before


@pytest.mark.parametrize("name", ["config.yaml", "metrics.json", "checkpoint.torch"])
def test_a_file_of_another_run_directory_is_refused(
    run: Path, trained: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other_run"
    shutil.copytree(trained, other, symlinks=True)
    before = snapshot(other)
    status, err = export(run / POINTER_NAME, other / name, capsys)
    assert_refused(status, err, other / name)
    assert snapshot(other) == before


def test_a_new_checkpoint_name_in_another_run_directory_is_refused(
    run: Path, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other_run"
    shutil.copytree(trained, other, symlinks=True)
    target = other / "phase00009_batch0000001.torch"
    status, err = export(run / POINTER_NAME, target, capsys)
    assert_refused(status, err, target)
    assert not target.exists()


def test_a_new_file_beside_the_run_files_is_written(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(run)
    status, err = export(run / POINTER_NAME, run / "backbone.pth", capsys)
    assert (status, err) == (0, "")
    weights = torch.load(run / "backbone.pth", weights_only=True)
    assert all(isinstance(value, torch.Tensor) for value in weights.values())
    assert {k: v for k, v in snapshot(run).items() if k != "backbone.pth"} == before
    assert [p.name for p in run.iterdir() if ".tmp-" in p.name] == []


def test_an_existing_export_is_replaced(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "backbone.pth"
    out.write_bytes(b"old")
    status, _ = export(run / POINTER_NAME, out, capsys)
    assert status == 0
    assert torch.load(out, weights_only=True)


def test_dev_full_is_refused_as_a_device_and_left_alone(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = os.stat("/dev/full")
    status, err = export(run / POINTER_NAME, Path("/dev/full"), capsys)
    assert_refused(status, err, Path("/dev/full"))
    assert "not a regular file" in err
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert "wrote" not in capsys.readouterr().out


def test_a_fifo_as_destination_is_refused_without_waiting(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.pth"
    os.mkfifo(fifo)
    status, err = export(run / POINTER_NAME, fifo, capsys)
    assert_refused(status, err, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_as_source_is_refused_without_waiting(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "phase00000_batch0000003.torch"
    os.mkfifo(fifo)
    shutil.copy(checksum_path(list_checkpoints(run)[-1]), checksum_path(fifo))
    status, err = export(fifo, tmp_path / "out.pth", capsys)
    assert_refused(status, err, fifo)
    assert "FIFO" in err
    assert not (tmp_path / "out.pth").exists()


def test_a_device_as_source_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = export(Path("/dev/zero"), tmp_path / "out.pth", capsys)
    assert_refused(status, err, Path("/dev/zero"))
    assert not (tmp_path / "out.pth").exists()


def test_a_full_disk_is_one_line_exit_1_and_leaves_nothing(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "small", size_kib=8) as small:
        (small / "backbone.pth").write_bytes(b"previous export")
        status, err = export(run / POINTER_NAME, small / "backbone.pth", capsys)
        assert status == 1
        assert err.startswith(f"hookbus export: error: cannot write {small / 'backbone.pth'}: ")
        assert "No space left on device" in err and len(err.splitlines()) == 1
        assert "wrote" not in capsys.readouterr().out
        assert [p.name for p in small.iterdir()] == ["backbone.pth"]
        assert (small / "backbone.pth").read_bytes() == b"previous export"


def test_a_read_only_folder_is_one_line_exit_1(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "ro", read_only=True) as folder:
        status, err = export(run / POINTER_NAME, folder / "backbone.pth", capsys)
        assert status == 1
        assert err == (
            f"hookbus export: error: cannot write {folder / 'backbone.pth'}: "
            "Read-only file system; it is left as it was"
        )
        assert list(folder.iterdir()) == []


def test_a_file_in_the_way_of_the_folder_is_one_line_exit_1(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "backbone.pth"
    status, err = export(run / POINTER_NAME, out, capsys)
    assert status == 1
    assert err.startswith(f"hookbus export: error: cannot write {out}: ")
    assert (tmp_path / "notes.txt").read_text() == "mine"

"""Checkpoint trust everywhere: every reader verifies the checksum, a candidate that
fails in any way is skipped with a fallback, the link stays inside its directory, and
bad files and paths give one line."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch

import hookbus.hooks.checkpoint as checkpoint_hook_module
import hookbus.run_start as run_start_module
from hookbus import CheckpointError, SSLTrainer, UserError
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import (
    POINTER_NAME,
    checksum_path,
    list_checkpoints,
    load_checkpoint,
    newest_valid_checkpoint,
    save_atomic,
)
from hookbus.engine.checkpoint.run_curves import read_curves
from hookbus.engine.errors import CheckpointWriteError
from hookbus.export import export_backbone
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models.pretrained import read_backbone_weights
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-epoch run with a checkpoint after each train phase (4 phases)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    cfg = tiny_config(run, checkpoint={"keep_last": 4})
    SSLTrainer(cfg, hooks=[CheckpointHook.from_config(cfg)]).train()
    return run


def copy_run(run: Path, to: Path) -> Path:
    to.mkdir()
    for path in run.iterdir():
        if path.is_file() and not path.is_symlink():
            (to / path.name).write_bytes(path.read_bytes())
    newest = list_checkpoints(to)[-1]
    os.symlink(newest.name, to / POINTER_NAME)
    return to


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_export_refuses_a_checkpoint_that_does_not_match_its_checksum(
    trained: Path, tmp_path: Path
) -> None:
    run = copy_run(trained, tmp_path / "run")
    flip_a_byte(list_checkpoints(run)[-1])
    with pytest.raises(CheckpointError, match="does not match its SHA-256"):
        export_backbone(run / POINTER_NAME, tmp_path / "out.pth")
    assert not (tmp_path / "out.pth").exists()


@pytest.mark.slow
def test_pretrained_weights_are_verified_too(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    newest = list_checkpoints(run)[-1]
    assert read_backbone_weights(newest)  # a good checkpoint reads
    checksum_path(newest).unlink()
    with pytest.raises(CheckpointError, match="has no checksum file"):
        read_backbone_weights(newest)


def test_export_to_a_directory_is_one_line_exit_2(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(trained / POINTER_NAME), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    expected = f"{tmp_path} is a directory: give the path of the file to write (.pth)"
    assert err == f"hookbus export: error: {expected}"
    assert issubclass(CheckpointError, UserError)


@pytest.mark.parametrize("damage", ["garbled sidecar", "unreadable file", "sidecar not text"])
def test_a_newest_checkpoint_that_fails_verifying_is_skipped(
    trained: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    run = copy_run(trained, tmp_path / "run")
    newest, previous = list_checkpoints(run)[-1], list_checkpoints(run)[-2]
    if damage == "garbled sidecar":
        checksum_path(newest).write_text("deadbeef not-a-size\n")
    elif damage == "sidecar not text":
        checksum_path(newest).write_bytes(b"\xff\xfe\x00")
    else:
        newest.unlink()
        newest.mkdir()  # reading it fails with IsADirectoryError
    path, _ = newest_valid_checkpoint(run)
    assert path == previous
    assert f"skipping checkpoint {newest}" in caplog.text


def test_a_link_to_a_file_outside_the_directory_is_not_followed(
    trained: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = copy_run(trained, tmp_path / "other")
    run = copy_run(trained, tmp_path / "run")
    for path in list_checkpoints(run)[2:]:  # this run only got as far as phase 1
        path.unlink()
        checksum_path(path).unlink()
    (run / POINTER_NAME).unlink()
    os.symlink(list_checkpoints(other)[-1], run / POINTER_NAME)
    path, _ = newest_valid_checkpoint(run)
    assert path == list_checkpoints(run)[-1]
    assert "points outside its directory" in caplog.text


@pytest.mark.parametrize(
    ("key", "value"),
    [("phase_idx", "1"), ("iteration", 2.5), ("train_phase_idx", None), ("iteration_num", -7)],
)
def test_a_crafted_counter_is_refused_naming_the_key(
    trained: Path, tmp_path: Path, key: str, value: object
) -> None:
    checkpoint = load_checkpoint(list_checkpoints(trained)[-1])
    checkpoint[key] = value
    crafted = tmp_path / "phase00009_batch0000001.torch"
    save_atomic(checkpoint, crafted)
    with pytest.raises(CheckpointError, match=f"{key} must be a counter"):
        load_checkpoint(crafted)


def test_a_failed_first_checkpoint_does_not_claim_a_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(obj: object, path: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_hook_module, "save_atomic", disk_full)
    hook = CheckpointHook(tmp_path)
    with pytest.raises(CheckpointWriteError, match="no checkpoint was written in .* yet"):
        hook._write({"tensor": torch.zeros(1)}, tmp_path / "phase00000_batch0000001.torch")
    save_atomic({"tensor": torch.zeros(1)}, tmp_path / "phase00000_batch0000001.torch")
    with pytest.raises(CheckpointWriteError, match="the previous checkpoint in .* is intact"):
        hook._write({"tensor": torch.zeros(1)}, tmp_path / "phase00001_batch0000001.torch")


def test_plot_of_a_corrupt_curves_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "curves.json").write_text('{"steps": [1, 2')
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookbus plot: error: {tmp_path / 'curves.json'} is not a curves file")
    (tmp_path / "curves.json").unlink()
    (tmp_path / "metrics.json").write_text(
        '[1, 2]\n{"phase_idx": "x"}\n{"phase_idx": 0, "loss": 1.0}\n'
    )
    assert read_curves(tmp_path).phases == [{"phase_idx": 0, "loss": 1.0}]


@pytest.mark.slow
def test_a_full_disk_at_the_start_is_one_line_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def disk_full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(run_start_module, "write_text_atomic", disk_full)
    recipe = str(Path(__file__).resolve().parents[2] / "configs" / "simclr_digits.yaml")
    args = ["train", recipe, f"checkpoint.dir={tmp_path}", "optimizer.num_epochs=1", "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"hookbus train: error: cannot write {tmp_path / 'config.yaml'}: No space left on "
        "device; nothing was trained"
    )

"""The bad-input table of sharded (FSDP) checkpoints: each class of docs/reliability.md's
table planted in the newest checkpoint of a real one-process FSDP run, its checksum list
rewritten to match where the class allows (so the check that refuses it is the one
for that class, not the checksum): resume skips it with a warning naming it and goes on
from the previous checkpoint; ``hookbus export`` refuses it in one line, exit status 2;
nothing hangs; no payload runs; and torch's warning that no process group exists is
never printed."""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.engine.checkpoint import sharded_checkpoint
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, list_checkpoints
from hookbus.engine.checkpoint.shard_files import MANIFEST_NAME, file_digest, manifest_text
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint, shards_folder
from tests.integration.fsdp_job import SMALL
from tests.tiny_data import tiny_recipe

PROCESS_GROUP_WARNING = "torch.distributed is disabled, unavailable or uninitialized"


def _config(run: Path, epochs: int):
    return tiny_recipe(
        "byol_digits", run, *SMALL, f"optimizer.num_epochs={epochs}", "distributed.strategy=fsdp"
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two epochs of BYOL on the tiny data set, FSDP in one process: two sharded
    checkpoints (after epoch 1 and 2), trained with every warning recorded."""
    folder = tmp_path_factory.mktemp("sharded") / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SSLTrainer(_config(folder, 2)).train()
    assert not [w for w in caught if PROCESS_GROUP_WARNING in str(w.message)]
    return folder


def _newest_folder(run: Path) -> Path:
    return shards_folder(run / POINTER_NAME)


def _rehash(folder: Path) -> None:
    """``shards.sha256`` rewritten for the regular files of ``folder`` as they are now."""
    listed = {}
    for path in folder.iterdir():
        if path.name != MANIFEST_NAME and path.is_file() and not path.is_symlink():
            listed[path.name] = file_digest(path)
    (folder / MANIFEST_NAME).write_text(manifest_text(listed))


def _metadata(folder: Path):
    return pickle.loads((folder / ".metadata").read_bytes())  # the test's own file


def _change_metadata(change: Callable[[object, Path], object]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        metadata = _metadata(folder)
        result = change(metadata, folder)
        (folder / ".metadata").write_bytes(pickle.dumps(metadata if result is None else result))
        _rehash(folder)

    return plant


def _model_key(metadata) -> str:
    return next(key for key in sorted(metadata.state_dict_metadata) if key.startswith("model/"))


def _huge_claim(metadata, folder: Path) -> None:
    entry = metadata.state_dict_metadata[_model_key(metadata)]
    entry.size = torch.Size([10**6, 10**6])
    for chunk in entry.chunks:
        chunk.offsets, chunk.sizes = torch.Size([0, 0]), torch.Size([10**6, 10**6])
    for index in list(metadata.storage_data):
        if index.fqn == _model_key(metadata):
            info = metadata.storage_data.pop(index)
            metadata.storage_data[dataclasses.replace(index, offset=torch.Size([0, 0]))] = info


def _shape_only_claim(metadata, folder: Path) -> None:
    entry = metadata.state_dict_metadata[_model_key(metadata)]
    entry.size = torch.Size([10**12, *entry.size[1:]])


def _stored_at(target: Callable[[Path], str]) -> Callable[[object, Path], None]:
    def change(metadata, folder: Path) -> None:
        for info in metadata.storage_data.values():
            info.relative_path = target(folder)

    return change


def _fifo_outside(folder: Path) -> str:
    fifo = folder.parent / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)
    return str(fifo)


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED_SHARDS",))


def _payload(folder: Path) -> None:
    (folder / ".metadata").write_bytes(pickle.dumps(_Payload()))
    _rehash(folder)


def _replace(name: str, make: Callable[[Path], None], rehash: bool = True) -> Callable:
    def plant(folder: Path) -> None:
        path = folder / name
        path.unlink()
        make(path)
        if rehash:
            _rehash(folder)

    return plant


def _sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(8 << 30)


def _truncate(folder: Path) -> None:
    shard = folder / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[:100])


def _link_outside(path: Path) -> None:
    copy = path.parent.parent / "copy.distcp"
    copy.write_bytes(b"\0" * 10)
    path.symlink_to(copy)


ROWS: dict[str, tuple[Callable[[Path], None], str]] = {
    "a pickle payload in the metadata": (_payload, "posix.system is not checkpoint metadata"),
    "a 10**12-element tensor claimed": (
        _change_metadata(_huge_claim),
        "claims 4000000000000 bytes for a chunk of shape \\[1000000, 1000000\\]",
    ),
    "a 10**12-element shape over small chunks": (
        _change_metadata(_shape_only_claim),
        "has chunks of \\d+ elements for a shape of \\d{13}",
    ),
    "a storage path to a FIFO outside the folder": (
        _change_metadata(_stored_at(_fifo_outside)),
        "is stored in '/.*', not a file of its own",  # a long path is cut short
    ),
    "a storage path that leaves the folder": (
        _change_metadata(_stored_at(lambda f: "../" + f.name + "/__0_0.distcp")),
        "is stored in '../.*', not a file of its own",
    ),
    "the metadata a FIFO": (_replace(".metadata", os.mkfifo, False), "is a FIFO"),
    "the metadata empty": (
        _replace(".metadata", lambda p: p.write_bytes(b"")),
        "cannot read .*\\.metadata",
    ),
    "a shard sparse 8 GiB": (
        _replace("__0_0.distcp", _sparse, False),
        "__0_0.distcp is 8.0 GiB, over hookbus's limit of",
    ),
    "a shard a symbolic link loop": (
        _replace("__0_0.distcp", lambda p: p.symlink_to(p), False),
        "__0_0.distcp is a symbolic link",
    ),
    "the metadata missing": (lambda f: (f / ".metadata").unlink(), ".metadata is missing"),
    "the metadata garbled": (
        _replace(".metadata", lambda p: p.write_bytes(b"\x80\x05garbage")),
        "cannot read .*\\.metadata",
    ),
    "the metadata a link to /dev/zero": (
        _replace(".metadata", lambda p: p.symlink_to("/dev/zero"), False),
        ".metadata is a symbolic link",
    ),
    "a shard truncated": (_truncate, "__0_0.distcp is 100 bytes, shards.sha256 says \\d+"),
    "a shard a symbolic link": (
        _replace("__0_0.distcp", _link_outside, False),
        "__0_0.distcp is a symbolic link",
    ),
    "a shard a folder": (_replace("__0_0.distcp", lambda p: p.mkdir(), False), "is a directory"),
    "the checksum list a FIFO": (
        _replace(MANIFEST_NAME, os.mkfifo, False),
        "shards.sha256 is missing or malformed",
    ),
    "the folder missing": (lambda f: shutil.rmtree(f), "its folder .* is missing"),
}
"""Each class of bad input that applies to a sharded checkpoint's folder."""


def _damaged_copy(run: Path, tmp_path: Path, name: str) -> Path:
    copy = Path(shutil.copytree(run, tmp_path / "run", symlinks=True))
    ROWS[name][0](_newest_folder(copy))
    return copy


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_damaged_sharded_checkpoint_is_skipped_for_the_previous_one_on_resume(
    name: str,
    run: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copy = _damaged_copy(run, tmp_path, name)
    monkeypatch.chdir(tmp_path)
    newest, previous = (path.resolve() for path in list_checkpoints(copy)[::-1][:2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = SSLTrainer(_config(copy, 3)).setup()
    assert state.resumed_from == str(previous)

    assert re.search(f"skipping checkpoint {newest}: .*({ROWS[name][1]})", caplog.text), caplog.text
    assert not [w for w in caught if PROCESS_GROUP_WARNING in str(w.message)]
    assert not (tmp_path / "PWNED_SHARDS").exists()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_export_of_a_damaged_sharded_checkpoint_is_one_line_exit_2(
    name: str,
    run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copy = _damaged_copy(run, tmp_path, name)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "backbone.pth"
    assert main(["export", str(copy / POINTER_NAME), str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err

    assert re.search(ROWS[name][1], err), err
    assert not out.exists() and not (tmp_path / "PWNED_SHARDS").exists()


def test_a_checkpoint_larger_than_the_memory_left_is_refused_before_allocating(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sharded_checkpoint, "available_memory", lambda: 1000)
    with pytest.raises(sharded_checkpoint.CheckpointError, match="need .* of memory to read"):
        load_whole_checkpoint(run / POINTER_NAME)


def test_a_sound_sharded_checkpoint_loads_without_torchs_process_group_warning(run: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint = load_whole_checkpoint(run / POINTER_NAME)
    assert not [w for w in caught if PROCESS_GROUP_WARNING in str(w.message)]
    assert all(torch.is_tensor(value) for value in checkpoint["model"].values())


WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
"""As root: without the capabilities to read any file and enter any folder."""


@pytest.mark.slow
def test_an_unreadable_shard_is_one_line_from_export(run: Path, tmp_path: Path) -> None:
    """In a ``hookbus export`` process for which permissions hold (root's override
    dropped with setpriv): a real mode 000 shard file."""
    copy = Path(shutil.copytree(run, tmp_path / "run", symlinks=True))
    shard = _newest_folder(copy) / "__0_0.distcp"
    shard.chmod(0)
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    out = tmp_path / "backbone.pth"
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "hookbus", "export", str(copy / POINTER_NAME), str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("hookbus export: error: sharded checkpoint "), done.stderr
    assert f"cannot read checkpoint shard {shard}: Permission denied" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and not out.exists()

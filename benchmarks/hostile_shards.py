"""The hostile-input campaign's cases for shard sets, ``hookbus shard``, the shard cache
folder and sharded checkpoints (benchmarks/hostile_inputs.py runs them with its own):

- ``shard sets``: a set written by ``hookbus shard`` from real photographs, damaged one
  way per case, given to ``hookbus train`` (``data.name: shards``);
- ``hookbus shard``: onto a full or a read-only tmpfs, and from a folder with a
  symbolic link loop;
- ``shard cache``: ``data.shards.cache_dir`` a file, a symbolic link loop, or a
  read-only tmpfs (each refused before the store is asked for anything, so the URL's
  endpoint is a closed port);
- ``sharded checkpoints``: the newest checkpoint of a one-process FSDP run (trained
  once per campaign) with a pickle payload as its metadata, a 10^12-element tensor
  claimed, a storage path to a FIFO outside its folder, its metadata a FIFO, read by
  ``hookbus export``.

Each case is built by a ``prepare(workdir)`` that returns the ``hookbus`` arguments and
may register a mount to undo (:func:`unmount_all`).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
SHARDS_RECIPE = str(ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml")
SMALL = [
    "data.name=shards",
    "data.image_size=16",
    "data.batch_size=4",
    "data.num_workers=0",
    "model.backbone.name=small_cnn",
    "model.backbone.width=4",
    "model.head.dims=[16,16,8]",
    "meters.knn.enabled=false",
    "optimizer.num_epochs=1",
    "hooks.evaluation_report.enabled=false",
    "hooks.summary_plot.enabled=false",
    "hooks.progress_bar.enabled=false",
]
KINDS = ("shard sets", "hookbus shard", "shard cache", "sharded checkpoints")
_MOUNTS: list[Path] = []
_MADE: dict[str, Path] = {}


class Skipped(Exception):
    """A case this machine cannot set up (no tmpfs mount, say)."""


def unmount_all() -> None:
    """Undo the tmpfs mounts the cases made."""
    while _MOUNTS:
        subprocess.run(["umount", "-l", str(_MOUNTS.pop())], check=False)


def _tmpfs(folder: Path, *, read_only: bool = False, full: bool = False) -> Path:
    folder.mkdir(parents=True)
    options = "size=64k" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        raise Skipped(f"cannot mount a tmpfs ({done.stderr.decode().strip()[:60]})")
    _MOUNTS.append(folder)
    if full:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
    return folder


def photos(cache: Path) -> Path:
    """A train folder of real photographs (scikit-learn's two), made once."""
    if "photos" not in _MADE:
        sys.path.insert(0, str(ROOT))
        from tests.photos import make_photo_folder

        _MADE["photos"] = make_photo_folder(cache / "photos", per_class=6, size=20) / "train"
    return _MADE["photos"]


def shard_set(workdir: Path) -> Path:
    """A fresh copy of the photographs' shards (several of at most 4 KiB) in ``workdir``."""
    if "shards" not in _MADE:
        from hookbus.shard import write_shards

        made = workdir.parent / "shards"
        write_shards(photos(workdir.parent), made, shard_bytes=4096)
        _MADE["shards"] = made
    return Path(shutil.copytree(_MADE["shards"], workdir / "set"))


def _set_case(plant: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        folder = shard_set(workdir)
        plant(folder)
        run = f"checkpoint.dir={workdir / 'run'}"
        return ["train", SHARDS_RECIPE, *SMALL, f"data.shards.path={folder}", run, "-q"]

    return prepare


def _first(folder: Path) -> Path:
    return folder / "shard.00000.mds"


def _replace_first(make: Callable[[Path], Any]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        _first(folder).unlink()
        make(_first(folder))

    return plant


def _index(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        index = json.loads((folder / "index.json").read_text())
        change(index)
        (folder / "index.json").write_text(json.dumps(index))

    return plant


def _set_first(key: str, value: Any) -> Callable[[dict], None]:
    def change(index: dict) -> None:
        index["shards"][0][key] = value

    return change


def _sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(8 << 30)


def _garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _other_writer(columns: dict[str, str], sample: dict) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        from streaming.base.format import MDSWriter

        for path in folder.iterdir():
            if path.name != "hookbus_shards.json":
                path.unlink()
        other = folder.with_name("other")
        writer = MDSWriter(out=str(other), columns=columns)
        for _ in range(3):
            writer.write(sample)
        writer.finish()
        for path in other.iterdir():
            path.rename(folder / path.name)

    return plant


def _classes(value: Any) -> Callable[[Path], None]:
    return lambda folder: (folder / "hookbus_shards.json").write_text(json.dumps(value))


def _shard_command(place: str) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        source = photos(workdir.parent)
        if place == "loop":
            source = Path(shutil.copytree(source, workdir / "photos"))
            (source / "china" / "again").symlink_to(source / "china")
            out = workdir / "out"
        else:
            disk = _tmpfs(workdir / "disk", read_only=place == "read-only", full=place == "full")
            out = disk / "shards"
        return ["shard", str(source), str(out), "--shard-bytes", "4096"]

    return prepare


def _cache_case(make: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        cache = make(workdir)
        run = f"checkpoint.dir={workdir / 'run'}"
        location = "data.shards.path=s3://photos/train"
        return [
            "train",
            SHARDS_RECIPE,
            *SMALL,
            location,
            f"data.shards.cache_dir={cache}",
            run,
            "-q",
        ]

    return prepare


def _cache_file(workdir: Path) -> Path:
    (workdir / "cache").write_text("x")
    return workdir / "cache"


def _cache_loop(workdir: Path) -> Path:
    (workdir / "cache").symlink_to(workdir / "cache")
    return workdir / "cache"


def fsdp_run(cache: Path) -> Path:
    """A one-process FSDP run of BYOL on the digits, 2 epochs: 2 sharded checkpoints."""
    if "fsdp" not in _MADE:
        run = cache / "fsdp"
        done = subprocess.run(
            [
                HOOKBUS,
                "train",
                str(ROOT / "configs" / "byol_digits.yaml"),
                f"checkpoint.dir={run}",
                "distributed.strategy=fsdp",
                "optimizer.num_epochs=2",
                "trainer.test_every_num_epochs=100",
                "hooks.evaluation_report.enabled=false",
                "hooks.progress_bar.enabled=false",
                "hooks.summary_plot.enabled=false",
                "-q",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the FSDP reference run failed: {done.stderr[-500:]}")
        _MADE["fsdp"] = run
    return _MADE["fsdp"]


def _rehash(folder: Path) -> None:
    from hookbus.engine.checkpoint.shard_files import MANIFEST_NAME, file_digest, manifest_text

    listed = {
        path.name: file_digest(path)
        for path in folder.iterdir()
        if path.name != MANIFEST_NAME and path.is_file() and not path.is_symlink()
    }
    (folder / MANIFEST_NAME).write_text(manifest_text(listed))


class _Payload:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch PWNED_SHARDS",))


def _ckpt_case(plant: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        from hookbus.engine.checkpoint.sharded_checkpoint import shards_folder

        run = Path(shutil.copytree(fsdp_run(workdir.parent), workdir / "run", symlinks=True))
        newest = (run / "checkpoint.torch").resolve()
        plant(shards_folder(newest))
        return ["export", str(newest), str(workdir / "backbone.pth")]

    return prepare


def _payload(folder: Path) -> None:
    (folder / ".metadata").write_bytes(pickle.dumps(_Payload()))
    _rehash(folder)


def _metadata(change: Callable[[Any, Path], None]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        metadata = pickle.loads((folder / ".metadata").read_bytes())  # the campaign's own file
        change(metadata, folder)
        (folder / ".metadata").write_bytes(pickle.dumps(metadata))
        _rehash(folder)

    return plant


def _huge(metadata: Any, folder: Path) -> None:
    import torch

    key = next(k for k in sorted(metadata.state_dict_metadata) if k.startswith("model/"))
    metadata.state_dict_metadata[key].size = torch.Size([10**12])


def _fifo_path(metadata: Any, folder: Path) -> None:
    fifo = folder.parent / "pipe"
    os.mkfifo(fifo)
    for info in metadata.storage_data.values():
        info.relative_path = str(fifo)


def _metadata_fifo(folder: Path) -> None:
    (folder / ".metadata").unlink()
    os.mkfifo(folder / ".metadata")


CASES: list[tuple[str, str, Callable[[Path], list[str]], str | None]] = [
    ("shard sets", "a shard a FIFO", _set_case(_replace_first(os.mkfifo)), None),
    (
        "shard sets",
        "a shard a link to /dev/zero",
        _set_case(_replace_first(lambda p: p.symlink_to("/dev/zero"))),
        None,
    ),
    ("shard sets", "a sparse 8 GiB shard", _set_case(_replace_first(_sparse)), None),
    (
        "shard sets",
        "a truncated shard",
        _set_case(lambda f: _first(f).write_bytes(_first(f).read_bytes()[:100])),
        None,
    ),
    ("shard sets", "a garbled shard", _set_case(lambda f: _garble(_first(f))), None),
    (
        "shard sets",
        "a sample count that is a string",
        _set_case(_index(_set_first("samples", "12"))),
        None,
    ),
    (
        "shard sets",
        "a sample count of 10**12",
        _set_case(_index(_set_first("samples", 10**12))),
        None,
    ),
    (
        "shard sets",
        "index.json nested 100000 deep",
        _set_case(lambda f: (f / "index.json").write_text("[" * 100_000 + "]" * 100_000)),
        None,
    ),
    (
        "shard sets",
        "a class list that is not a list",
        _set_case(_classes({"classes": "china"})),
        None,
    ),
    (
        "shard sets",
        "a class list naming fewer classes than the labels",
        _set_case(_classes({"classes": ["china"]})),
        None,
    ),
    (
        "shard sets",
        "another writer's string labels",
        _set_case(_other_writer({"image": "bytes", "label": "str"}, {"image": b"x", "label": "a"})),
        None,
    ),
    (
        "shard sets",
        "another writer's set without labels",
        _set_case(_other_writer({"image": "bytes"}, {"image": b"x"})),
        None,
    ),
    ("hookbus shard", "onto a full disk", _shard_command("full"), None),
    ("hookbus shard", "onto a read-only disk", _shard_command("read-only"), None),
    ("hookbus shard", "from a folder with a symlink loop", _shard_command("loop"), None),
    ("shard cache", "cache_dir a file", _cache_case(_cache_file), None),
    ("shard cache", "cache_dir a symbolic link loop", _cache_case(_cache_loop), None),
    (
        "shard cache",
        "cache_dir on a read-only disk",
        _cache_case(lambda w: _tmpfs(w / "cache", read_only=True)),
        None,
    ),
    (
        "sharded checkpoints",
        "a pickle payload as the metadata (export)",
        _ckpt_case(_payload),
        "PWNED_SHARDS",
    ),
    (
        "sharded checkpoints",
        "a 10**12-element tensor claimed (export)",
        _ckpt_case(_metadata(_huge)),
        None,
    ),
    (
        "sharded checkpoints",
        "a storage path to a FIFO outside the folder (export)",
        _ckpt_case(_metadata(_fifo_path)),
        None,
    ),
    ("sharded checkpoints", "the metadata a FIFO (export)", _ckpt_case(_metadata_fifo), None),
]
"""``(kind, name, prepare, file a payload would create)`` of each case."""

CLOSED_PORT_ENV = {
    "S3_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_ACCESS_KEY_ID": "hookbus-campaign",
    "AWS_SECRET_ACCESS_KEY": "hookbus-campaign",
}
"""The store of the cache cases: nothing listens on port 9 (none is asked)."""

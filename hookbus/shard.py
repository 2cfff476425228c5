"""``hookbus shard FOLDER OUT``: an image folder written as MDS shards for ``data.name: shards``.

Each sample holds one image file's bytes, unchanged (the pixels a run reads are the
folder's), and its label; the classes are the folder's (sorted class folder names, as
:class:`~hookbus.parts.data.image_folder.ImageFolderDataset` reads them; none for a
flat folder, whose images are labelled -1) and are kept in ``OUT/hookbus_shards.json``.
Images are written in the folder's order; the train order is the sampler's.

The set is written whole or not at all:

1. the folder is walked (:func:`~hookbus.engine.folder_walk.walk_folder`: a symbolic
   link loop, an unreadable folder or a FIFO named like an image is one line) and every
   image identified, before anything is written;
2. the shards, ``index.json`` (each shard's size, sample count and SHA-256) and the
   class list go into ``.OUT.partial-PID-*`` beside ``OUT``, each file flushed to disk;
3. every shard is read back and checked against the index as a run checks it
   (:func:`~hookbus.parts.data.shard_index.check_shard`), the samples counted;
4. the folder is renamed to ``OUT``.

A failure on the way (a full disk, a read-only place) is a
:class:`~hookbus.engine.errors.WriteFailure` naming ``OUT`` (one line, exit status 1)
and removes the partial folder; a killed writer leaves only its partial folder, which
the next run removes, so nothing named ``OUT`` is ever half there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from streaming.base.format import MDSWriter

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, read_bounded
from hookbus.engine.errors import DataError, UserError, WriteFailure, writing
from hookbus.engine.folder_walk import walk_folder
from hookbus.parts.data.image_folder import IMAGE_EXTENSIONS, NOT_AN_IMAGE, ImageFolderDataset
from hookbus.parts.data.shard_cache import INDEX_FILE
from hookbus.parts.data.shard_index import (
    CLASSES_FILE,
    COLUMNS,
    MAX_SHARD_BYTES,
    check_shard,
    read_classes,
    read_index,
)

DEFAULT_SHARD_BYTES = 64 << 20
MIN_SHARD_BYTES = 1 << 10
HASHES = ["sha256"]
"""The hash each shard's entry in ``index.json`` records, checked by every reader."""
NOTHING_WRITTEN = "nothing was written to {out}: free space or fix the permission, then run again"


@dataclass(frozen=True)
class ShardsWritten:
    """What :func:`write_shards` wrote."""

    images: int
    shards: int
    classes: list[str]


def write_shards(folder: Path, out: Path, shard_bytes: int = DEFAULT_SHARD_BYTES) -> ShardsWritten:
    """Write the images under ``folder`` into shards of at most ``shard_bytes`` in
    ``out``, which must not exist or be an empty folder (see the module's docstring).
    A file that is no image, or a folder that cannot be walked, is a :class:`DataError`
    naming it, before anything is written; a write that fails, a :class:`WriteFailure`."""
    folder, out = Path(folder), Path(out)
    if os.path.lexists(out) and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} already exists and is not an empty folder: choose another OUT")
    if not MIN_SHARD_BYTES <= shard_bytes <= MAX_SHARD_BYTES:
        raise UserError(
            f"--shard-bytes {shard_bytes}: give from {MIN_SHARD_BYTES} to {MAX_SHARD_BYTES}"
        )
    walk_folder(folder, suffixes=IMAGE_EXTENSIONS, what="image", error=DataError).refuse_problems(
        DataError
    )
    images = ImageFolderDataset(folder, decode=False)
    for path, _ in images.samples:
        _check_image(path)
    after = NOTHING_WRITTEN.format(out=out)
    parent = out.absolute().parent
    with writing(parent, after):
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(parent, out.name)
        partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-{os.getpid()}-", dir=parent))
    try:
        with writing(out, after):
            _write(images, partial, shard_bytes)
        shards = _verify(partial, len(images.samples), out)
        with writing(out, after):
            os.rename(partial, out)
            _fsync(parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return ShardsWritten(len(images.samples), shards, images.classes)


def _write(images: ImageFolderDataset, partial: Path, shard_bytes: int) -> None:
    """The shards, ``index.json`` and the class list, in ``partial``, on disk."""
    writer = MDSWriter(out=str(partial), columns=COLUMNS, size_limit=shard_bytes, hashes=HASHES)
    for path, label in images.samples:
        data = read_bounded(path, "image", MAX_IMAGE_BYTES, error=DataError)
        writer.write({"image": data, "label": label})
    writer.finish()  # only now: the library's own exit writes an index whatever happened
    (partial / CLASSES_FILE).write_text(json.dumps({"classes": images.classes}) + "\n")
    for path in partial.iterdir():
        _fsync(path)
    _fsync(partial)


def _verify(partial: Path, images: int, out: Path) -> int:
    """The number of shards in ``partial``, each read back and checked against the
    index; WriteFailure when what is on disk is not what was written."""
    try:
        entries = read_index(partial / INDEX_FILE)
        classes = read_classes(partial / CLASSES_FILE)
        for entry in entries:
            check_shard(partial / entry.basename, entry, classes)
    except DataError as exc:
        raise WriteFailure(f"the shards written for {out} do not read back: {exc}") from None
    written = sum(entry.samples for entry in entries)
    if written != images:
        raise WriteFailure(f"the shards written for {out} hold {written} images of {images}")
    return len(entries)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale(parent: Path, name: str) -> None:
    """Remove the partial folders of ``name`` left in ``parent`` by writers that died."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.partial-(\d+)-")
    for entry in os.scandir(parent):
        found = pattern.match(entry.name)
        if found and entry.is_dir(follow_symlinks=False) and not _alive(int(found.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _check_image(path: Path) -> None:
    """DataError naming ``path`` unless Pillow identifies an image in it."""
    try:
        with Image.open(path) as image:
            image.verify()
    except Exception as exc:  # Pillow's errors for a file that is not a readable image
        raise DataError(f"cannot read image {path}: {NOT_AN_IMAGE} ({exc})") from None

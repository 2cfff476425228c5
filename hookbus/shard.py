"""``hookbus shard FOLDER OUT``: an image folder written as MDS shards for ``data.name: shards``.

Each sample holds one image file's bytes, unchanged (the pixels a run reads are the
folder's), and its label; the classes are the folder's (sorted class folder names, as
:class:`~hookbus.parts.data.image_folder.ImageFolderDataset` reads them; none for a
flat folder, whose images are labelled -1) and are kept in ``OUT/hookbus_shards.json``.
Images are written in the folder's order; the train order is the sampler's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from streaming.base.format import MDSWriter

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, read_bounded
from hookbus.engine.errors import DataError, UserError
from hookbus.parts.data.image_folder import NOT_AN_IMAGE, ImageFolderDataset
from hookbus.parts.data.shard_cache import INDEX_FILE
from hookbus.parts.data.shards import CLASSES_FILE

COLUMNS = {"image": "bytes", "label": "int"}
"""The shards' columns: no pickled column, so reading one runs no code."""

DEFAULT_SHARD_BYTES = 64 << 20
MIN_SHARD_BYTES = 1 << 10


@dataclass(frozen=True)
class ShardsWritten:
    """What :func:`write_shards` wrote."""

    images: int
    shards: int
    classes: list[str]


def write_shards(folder: Path, out: Path, shard_bytes: int = DEFAULT_SHARD_BYTES) -> ShardsWritten:
    """Write the images under ``folder`` into shards of at most ``shard_bytes`` in
    ``out``, which must not exist or be empty. An image Pillow cannot identify is a
    :class:`DataError` naming it, before anything is written."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} already exists and is not an empty folder: choose another OUT")
    if shard_bytes < MIN_SHARD_BYTES:
        raise UserError(f"--shard-bytes {shard_bytes}: give at least {MIN_SHARD_BYTES}")
    images = ImageFolderDataset(folder, decode=False)
    for path, _ in images.samples:
        _check_image(path)
    with MDSWriter(out=str(out), columns=COLUMNS, size_limit=shard_bytes) as writer:
        for path, label in images.samples:
            data = read_bounded(path, "image", MAX_IMAGE_BYTES, error=DataError)
            writer.write({"image": data, "label": label})
    (out / CLASSES_FILE).write_text(json.dumps({"classes": images.classes}) + "\n")
    index = json.loads((out / INDEX_FILE).read_text())
    return ShardsWritten(len(images.samples), len(index["shards"]), images.classes)


def _check_image(path: Path) -> None:
    """DataError naming ``path`` unless Pillow identifies an image in it."""
    try:
        with Image.open(path) as image:
            image.verify()
    except Exception as exc:  # Pillow's errors for a file that is not a readable image
        raise DataError(f"cannot read image {path}: {NOT_AN_IMAGE} ({exc})") from None

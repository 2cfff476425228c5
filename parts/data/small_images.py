"""Images smaller than the views cut from them: said in one line when a folder is read.

A 1x1 thumbnail or a 40-pixel icon in a photo folder is upsampled to every view it
gives (``data.image_size`` pixels a side): a blur the model learns from. Nothing is
refused, but it is not silent either: :func:`warn_small_images` reads the size of each
image from its header (a JPEG file's frame header, else Pillow's, never the pixels) and
logs one line with how many are smaller than the views, and the first few names.

A folder of more than :data:`MAX_CHECKED` images is checked on that many, spread evenly
over it, and the line says so; an image whose size cannot be read is left to the decoder,
which names it when it is read.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

from PIL import Image

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, open_regular
from hookbus.engine.errors import DataError
from hookbus.parts.data.image_decode import jpeg_header

logger = logging.getLogger("hookbus")

MAX_CHECKED = 10_000
"""The most images of a folder whose sizes are read (evenly spread over it)."""

NAMES_SHOWN = 3
"""How many small images the line names."""

HEADER_BYTES = 64 << 10
"""Bytes read from the start of a file for its size (a JPEG frame header comes after its
EXIF block, thumbnail included, which is smaller than this in nearly every photo)."""


def image_size(path: Path) -> tuple[int, int] | None:
    """``(width, height)`` as stored in the file ``path`` (its EXIF orientation not
    applied: a quarter turn changes neither side's length), or None when it cannot be
    read from the header."""
    try:
        with open_regular(path, "image", limit=MAX_IMAGE_BYTES, error=DataError) as handle:
            start = handle.read(HEADER_BYTES)
            header = jpeg_header(start)
            if header is not None:
                return header[1], header[0]
            handle.seek(0)
            with warnings.catch_warnings():  # a bomb is the decoder's to name
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(handle) as image:
                    return image.size
    except (
        DataError,
        OSError,
        ValueError,
        SyntaxError,
        EOFError,
        Image.DecompressionBombError,
        Image.DecompressionBombWarning,
    ):
        return None


def small_images(paths: Sequence[Path], side: int) -> tuple[list[Path], int]:
    """The images among ``paths`` (at most :data:`MAX_CHECKED` of them, evenly spread)
    whose shorter side is under ``side`` pixels, and how many were checked."""
    step = max(1, -(-len(paths) // MAX_CHECKED))
    checked = paths[::step]
    small = []
    for path in checked:
        size = image_size(path)
        if size is not None and min(size) < side:
            small.append(path)
    return small, len(checked)


def warn_small_images(paths: Sequence[Path], side: int, folder: Path) -> int:
    """Log one warning line when images among ``paths`` (the images of ``folder``) are
    smaller than ``side`` pixels (``data.image_size``); returns how many were found."""
    small, checked = small_images(paths, side)
    if not small:
        return 0
    names = ", ".join(
        f"{path.relative_to(folder) if path.is_relative_to(folder) else path}"
        for path in small[:NAMES_SHOWN]
    )
    more = ", ..." if len(small) > NAMES_SHOWN else ""
    of = (
        f"{checked} checked of the {len(paths)} images"
        if checked < len(paths)
        else f"the {len(paths)} images"
    )
    logger.warning(
        "%d of %s in %s are smaller than the %d px views (data.image_size) and are "
        "upsampled to them: %s%s",
        len(small),
        of,
        folder,
        side,
        names,
        more,
    )
    return len(small)

"""Images to cut views from: files read once and decoded at the size their crops need."""

from __future__ import annotations

import io
import struct
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import torch
from PIL import Image, UnidentifiedImageError
from torch import Tensor

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, read_bounded
from hookbus.engine.errors import DataError
from hookbus.parts.data.decoder_output import decoder_output
from hookbus.parts.data.image_pixels import rgb_array, upright

NOT_AN_IMAGE = "not an image file Pillow can identify"
"""What a file Pillow finds no image format in is, in the error naming it."""

JPEG_REDUCTIONS = (8, 4, 2)
"""Sizes a JPEG decoder divides an image by in its DCT stage (Pillow's draft mode)."""

_START_OF_FRAME = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
"""JPEG markers that open a frame header (height, width, components)."""
_APP1 = 0xE1
"""The JPEG marker of the segment that holds a file's EXIF block."""
EXIF_PREFIX = b"Exif\x00\x00"
"""How an ``APP1`` segment holding EXIF starts."""
QUARTER_TURNS = (5, 6, 7, 8)
"""EXIF orientations that turn the stored image a quarter: its width becomes its height."""
ORIENTATION_TAG = 0x0112
"""The EXIF tag of a photo's orientation (1: upright; 5 to 8: turned a quarter)."""


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int, int]]:
    """``(marker, start, end)`` of each marker segment of a JPEG file's header, up to its
    first frame header (``start``: the segment's first byte after its length)."""
    if data[:2] != b"\xff\xd8":
        return
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return
        marker = data[position + 1]
        if marker == 0xFF:
            position += 1
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        yield marker, position + 4, position + 2 + length
        if marker in _START_OF_FRAME:
            return
        position += 2 + length


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """``(height, width, components)`` from a JPEG file's frame header, or None when
    ``data`` is not a JPEG file this reader follows (the caller then asks Pillow)."""
    for marker, start, _ in _jpeg_segments(data):
        if marker in _START_OF_FRAME:
            frame = data[start : start + 6]
            if len(frame) < 6:
                return None
            height = int.from_bytes(frame[1:3], "big")
            width = int.from_bytes(frame[3:5], "big")
            return (height, width, frame[5]) if height and width else None
    return None


def jpeg_orientation(data: bytes) -> int:
    """The EXIF orientation tag of a JPEG file (1 to 8; 1, upright, when it has none or
    its EXIF block cannot be parsed), read with Pillow's EXIF parser from the file's
    ``APP1`` segment."""
    for marker, start, end in _jpeg_segments(data):
        if marker == _APP1 and data[start : start + 6] == EXIF_PREFIX:
            exif = Image.Exif()
            try:
                exif.load(data[start:end])
                orientation = exif.get(ORIENTATION_TAG, 1)
            except (OSError, ValueError, SyntaxError, TypeError, KeyError, IndexError):
                return 1
            return orientation if orientation in range(1, 9) else 1
    return 1


@cache
def _libjpeg_decoder() -> tuple[Any, int] | None:
    """torchvision's libjpeg-turbo JPEG decoder op, ``(data, mode, exif) -> [C, H, W]``,
    and the mode that asks it for RGB, or None where this torchvision has none. (The op
    itself: its public wrapper ``torchvision.io.decode_jpeg`` adds only a deprecation
    warning at every call.) torchvision is imported at the first JPEG decoded, not with
    this module, so a run on tensors never loads it."""
    from torchvision.io import ImageReadMode  # registers torch.ops.image

    try:
        return torch.ops.image.decode_jpeg, ImageReadMode.RGB.value
    except (AttributeError, RuntimeError):
        return None


ImageSource = str | Path | bytes | Tensor
"""What a data set item's image may be: an image file, its bytes (a shard's sample) or a
uint8 tensor ``[3, H, W]``."""


class SourceImage:
    """One image of a batch, opened but not yet decoded.

    ``height`` and ``width`` are the upright image's, known from the file's header (its
    EXIF orientation applied: a phone's sideways photo is taller than wide); :meth:`pixels`
    decodes it upright, a JPEG file at ``1 / reduction`` of its size when asked
    (Pillow's draft mode: the decoder skips the finer DCT coefficients, which is cheaper
    than decoding everything and resizing). At full size a JPEG file is decoded with
    torchvision's libjpeg-turbo decoder, which gives Pillow's pixels, faster (Pillow where
    torchvision has none); other formats with Pillow. An image of more pixels than
    Pillow's bound (``PIL.Image.MAX_IMAGE_PIXELS``, about 89 million) is refused before it
    is decoded, never warned about. Every image becomes 8-bit RGB as
    :func:`~hookbus.parts.data.image_pixels.rgb_array` says (16-bit scaled, transparency
    on white). A file Pillow cannot read, or one that is not a regular file of at most
    :data:`~hookbus.engine.bounded_files.MAX_IMAGE_BYTES` (checked before it is read),
    raises :class:`hookbus.engine.errors.DataError` naming it, libjpeg's own warning in
    the same line (never printed before it: :mod:`~hookbus.parts.data.decoder_output`).
    """

    def __init__(self, source: ImageSource, where: str) -> None:
        self.where = where
        self._data: bytes | None = None
        self._pil: Image.Image | None = None
        self._tensor: Tensor | None = None
        self._jpeg_components = 0
        self._orientation = 1
        self._printed: tuple[str, ...] = ()
        if isinstance(source, str | Path | bytes):
            self._data = (
                source
                if isinstance(source, bytes)
                else read_bounded(Path(source), "image", MAX_IMAGE_BYTES, error=DataError)
            )
            header = jpeg_header(self._data)
            if header is None:  # not a JPEG file: decoded whole now, its EXIF read after
                image = self._load(self._open())
                self._stored_width, self._stored_height = image.size
                self._orientation = _orientation(image)
            else:
                self._stored_height, self._stored_width, self._jpeg_components = header
                self._orientation = jpeg_orientation(self._data)
                self._check_pixels()
            turned = self._orientation in QUARTER_TURNS
            self.width = self._stored_height if turned else self._stored_width
            self.height = self._stored_width if turned else self._stored_height
            return
        if (
            not isinstance(source, Tensor)
            or source.dim() != 3
            or source.shape[0] != 3
            or source.dtype != torch.uint8
        ):
            got = (
                f"{source.dtype} {list(source.shape)}"
                if isinstance(source, Tensor)
                else type(source).__name__
            )
            raise DataError(
                f"{where}: data.pipeline crop_first takes image files and RGB images "
                f"(uint8 [3, H, W]), got {got}; use data.pipeline torchvision for other "
                "images"
            )
        self._tensor = source
        self.height, self.width = source.shape[1], source.shape[2]

    def _open(self) -> Image.Image:
        """The file opened with Pillow (its header read, its pixels not yet)."""
        if self._pil is None:
            assert self._data is not None
            try:
                with warnings.catch_warnings():  # over MAX_IMAGE_PIXELS: refused, not said
                    warnings.simplefilter("error", Image.DecompressionBombWarning)
                    self._pil = Image.open(io.BytesIO(self._data))
            except UnidentifiedImageError:  # its message names a BytesIO, not the file
                raise DataError(f"cannot read image {self.where}: {NOT_AN_IMAGE}") from None
            except (
                OSError,
                ValueError,
                SyntaxError,
                EOFError,
                Image.DecompressionBombError,
                Image.DecompressionBombWarning,
            ) as exc:
                raise DataError(f"cannot read image {self.where}: {exc}") from None
        return self._pil

    def _check_pixels(self) -> None:
        """DataError when the JPEG file's header claims more pixels than Pillow's bound
        (``PIL.Image.MAX_IMAGE_PIXELS``), before anything is decoded."""
        pixels = self._stored_width * self._stored_height
        limit = Image.MAX_IMAGE_PIXELS
        if limit is not None and pixels > limit:
            raise DataError(
                f"cannot read image {self.where}: it claims {self._stored_width} x "
                f"{self._stored_height} pixels, over the limit of {limit} (a decompression "
                "bomb?)"
            )

    @property
    def reducible(self) -> bool:
        """Whether :meth:`pixels` can decode at a reduced size (a JPEG file)."""
        return self._jpeg_components > 0

    def pixels(self, reduction: int = 1) -> Tensor:
        """The upright image as uint8 ``[1, 3, h, w]``, ``h, w`` the size divided by
        ``reduction`` (rounded up; 1 unless :attr:`reducible`)."""
        if self._tensor is not None:
            return self._tensor.unsqueeze(0)
        jpeg = reduction == 1 and self._jpeg_components in (1, 3)
        decoder = _libjpeg_decoder() if jpeg else None
        if decoder is not None:
            assert self._data is not None
            raw = torch.frombuffer(bytearray(self._data), dtype=torch.uint8)
            with decoder_output() as printed:
                try:
                    decoded = decoder[0](raw, decoder[1], False)
                except RuntimeError:  # damaged, or a variant its API refuses: Pillow's turn
                    decoded = None
            if decoded is not None:
                return turned_upright(decoded, self._orientation).unsqueeze(0)
            self._printed = printed.lines
        image = self._open()
        if self.reducible and reduction > 1:
            image.draft("RGB", (self._stored_width // reduction, self._stored_height // reduction))
        try:
            array = rgb_array(upright(self._load(image)))
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read image {self.where}: {exc}") from None
        return torch.from_numpy(array).permute(2, 0, 1).unsqueeze(0)

    def _load(self, image: Image.Image) -> Image.Image:
        """``image`` with its pixels decoded; DataError naming the file, with what the
        decoder printed about it, when that fails."""
        with decoder_output() as printed:
            try:
                image.load()
                failure = None
            except (
                OSError,
                ValueError,
                SyntaxError,
                EOFError,
                struct.error,
                Image.DecompressionBombError,
            ) as exc:
                failure = str(exc)
        if failure is None:
            return image
        said = "; ".join(self._printed + printed.lines)
        reason = f"{failure} ({said})" if said and said not in failure else failure
        raise DataError(f"cannot read image {self.where}: {reason}")


def turned_upright(pixels: Tensor, orientation: int) -> Tensor:
    """``pixels [C, H, W]`` turned as the EXIF ``orientation`` says, as
    :func:`PIL.ImageOps.exif_transpose` turns a Pillow image."""
    if orientation == 2:
        return pixels.flip(-1)
    if orientation == 3:
        return pixels.flip(-1, -2)
    if orientation == 4:
        return pixels.flip(-2)
    if orientation == 5:
        return pixels.transpose(-1, -2)
    if orientation == 6:
        return pixels.rot90(-1, (-2, -1))
    if orientation == 7:
        return pixels.transpose(-1, -2).flip(-1, -2)
    if orientation == 8:
        return pixels.rot90(1, (-2, -1))
    return pixels


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation tag of an opened image (1, upright, when it has none or its
    EXIF block cannot be parsed)."""
    try:
        orientation = image.getexif().get(ORIENTATION_TAG, 1)
    except (OSError, ValueError, SyntaxError, TypeError, KeyError, IndexError, struct.error):
        return 1
    return orientation if orientation in range(1, 9) else 1


def read_image(path: Path) -> Tensor:
    """The image at ``path`` as an upright uint8 RGB tensor ``[3, H, W]`` (see
    :class:`SourceImage`); DataError naming it if it cannot be read, or is not a
    regular file within :data:`~hookbus.engine.bounded_files.MAX_IMAGE_BYTES`."""
    return SourceImage(path, str(path)).pixels()[0].contiguous()

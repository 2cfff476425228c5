"""Images to cut views from: files read once and decoded at the size their crops need."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch import Tensor
from torchvision.io import ImageReadMode

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, read_bounded
from hookbus.engine.errors import DataError
from hookbus.parts.data.image_folder import NOT_AN_IMAGE

JPEG_REDUCTIONS = (8, 4, 2)
"""Sizes a JPEG decoder divides an image by in its DCT stage (Pillow's draft mode)."""

_START_OF_FRAME = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
"""JPEG markers that open a frame header (height, width, components)."""


def jpeg_header(data: bytes) -> tuple[int, int, int] | None:
    """``(height, width, components)`` from a JPEG file's frame header, or None when
    ``data`` is not a JPEG file this reader follows (the caller then asks Pillow)."""
    if data[:2] != b"\xff\xd8":
        return None
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:
            position += 1
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if marker in _START_OF_FRAME:
            frame = data[position + 4 : position + 10]
            if len(frame) < 6:
                return None
            height = int.from_bytes(frame[1:3], "big")
            width = int.from_bytes(frame[3:5], "big")
            return (height, width, frame[5]) if height and width else None
        position += 2 + length
    return None


def _libjpeg_decoder() -> Any:
    """torchvision's libjpeg-turbo JPEG decoder op, ``(data, mode, exif) -> [C, H, W]``,
    or None where this torchvision has none. (The op itself: its public wrapper
    ``torchvision.io.decode_jpeg`` adds only a deprecation warning at every call.)"""
    try:
        return torch.ops.image.decode_jpeg
    except (AttributeError, RuntimeError):
        return None


_DECODE_JPEG = _libjpeg_decoder()

ImageSource = str | Path | bytes | Tensor
"""What a data set item's image may be: an image file, its bytes (a shard's sample) or a
uint8 tensor ``[3, H, W]``."""


class SourceImage:
    """One image of a batch, opened but not yet decoded.

    ``size`` is known from the file's header; :meth:`pixels` decodes it, a JPEG file at
    ``1 / reduction`` of its size when asked (Pillow's draft mode: the decoder skips
    the finer DCT coefficients, which is cheaper than decoding everything and
    resizing). At full size a JPEG file is decoded with torchvision's libjpeg-turbo
    decoder, which gives Pillow's pixels, faster (Pillow where torchvision has none);
    other formats with Pillow. Every
    image becomes RGB; a file Pillow cannot read, or one that is not a regular file of at
    most :data:`~hookbus.engine.bounded_files.MAX_IMAGE_BYTES` (checked before it is
    read), raises :class:`hookbus.engine.errors.DataError` naming it.
    """

    def __init__(self, source: ImageSource, where: str) -> None:
        self.where = where
        self._data: bytes | None = None
        self._pil: Image.Image | None = None
        self._tensor: Tensor | None = None
        self._jpeg_components = 0
        if isinstance(source, str | Path | bytes):
            self._data = (
                source
                if isinstance(source, bytes)
                else read_bounded(Path(source), "image", MAX_IMAGE_BYTES, error=DataError)
            )
            header = jpeg_header(self._data)
            if header is None:
                self.width, self.height = self._open().size
            else:
                self.height, self.width, self._jpeg_components = header
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
                self._pil = Image.open(io.BytesIO(self._data))
            except UnidentifiedImageError:  # its message names a BytesIO, not the file
                raise DataError(f"cannot read image {self.where}: {NOT_AN_IMAGE}") from None
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise DataError(f"cannot read image {self.where}: {exc}") from None
        return self._pil

    @property
    def reducible(self) -> bool:
        """Whether :meth:`pixels` can decode at a reduced size (a JPEG file)."""
        return self._jpeg_components > 0

    def pixels(self, reduction: int = 1) -> Tensor:
        """The image as uint8 ``[1, 3, h, w]`` with channels-last strides, ``h, w`` the
        size divided by ``reduction`` (rounded up; 1 unless :attr:`reducible`)."""
        if self._tensor is not None:
            return self._tensor.unsqueeze(0)
        if reduction == 1 and self._jpeg_components in (1, 3) and _DECODE_JPEG is not None:
            assert self._data is not None
            raw = torch.frombuffer(bytearray(self._data), dtype=torch.uint8)
            try:
                return _DECODE_JPEG(raw, ImageReadMode.RGB.value, False).unsqueeze(0)
            except RuntimeError:
                pass  # a JPEG variant libjpeg-turbo's API refuses: Pillow reads it below
        image = self._open()
        try:
            if self.reducible and reduction > 1:
                image.draft("RGB", (self.width // reduction, self.height // reduction))
            array = np.array(image if image.mode == "RGB" else image.convert("RGB"))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise DataError(f"cannot read image {self.where}: {exc}") from None
        return torch.from_numpy(array).permute(2, 0, 1).unsqueeze(0)

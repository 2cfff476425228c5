"""A decoded Pillow image as the RGB pixels a photograph shows: upright, 8 bits a channel.

Every image file hookbus trains on, evaluates or embeds passes through here once decoded
(:class:`~hookbus.parts.data.image_decode.SourceImage`), so the three see the same pixels:

- **upright**: the EXIF orientation tag (a phone's sideways and upside-down photos) is
  applied, as a viewer shows the photo (:func:`PIL.ImageOps.exif_transpose`); an EXIF
  block Pillow cannot parse counts as no tag, as in a viewer;
- **scaled, not clipped**: a 16-bit image (``I;16`` and its byte orders) is mapped from
  0..65535 to 0..255 (``round(value / 257)``), where Pillow's own conversion clips every
  value over 255 to white; 32-bit integer (``I``) images with values in 0..65535 the same,
  and ``F`` images in 0..1 to 0..255; either of those with values outside that range is
  stretched from its own minimum..maximum (NaN and infinities read as the minimum);
- **transparency on white**: an image with an alpha channel or a transparent colour
  (``RGBA``, ``LA``, ``PA``, ``P`` or ``L`` with ``transparency``) is composited over
  white, as a page shows it, never reduced to the colours hidden under transparent pixels;
- **every other mode** (``1``, ``L``, ``P``, ``CMYK``, ``YCbCr``, ``HSV``, ``RGBX``) by
  Pillow's conversion to RGB. A mode Pillow cannot convert raises ``ValueError``, which
  the decoder turns into its one line naming the file.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageOps

SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
"""Pillow's modes of 16-bit single-channel images (a 16-bit grayscale PNG or TIFF)."""

SIXTEEN_BIT_MAX = 65535
"""The largest value of a 16-bit channel: white."""

BACKGROUND = (255, 255, 255)
"""What shows through transparent pixels: white."""


def upright(image: Image.Image) -> Image.Image:
    """``image`` turned as its EXIF orientation tag says (itself when it has none)."""
    try:
        turned = ImageOps.exif_transpose(image)
    except (OSError, ValueError, SyntaxError, TypeError, KeyError):  # an unparsable EXIF block
        return image
    return image if turned is None else turned


def _to_8_bit(values: np.ndarray, top: float) -> np.ndarray:
    """``values`` mapped from 0..``top`` to uint8 0..255 when they lie there, else
    stretched from their own minimum..maximum (a constant image is black); values that
    are not finite count as the minimum."""
    values = values.astype(np.float64)
    finite = np.isfinite(values)
    low = float(values[finite].min()) if finite.any() else 0.0
    values = np.where(finite, values, low)
    high = float(values.max()) if values.size else 0.0
    if low < 0 or high > top:
        values, top = values - low, high - low
    scaled = values * (255 / top) if top > 0 else np.zeros_like(values)
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def rgb_array(image: Image.Image) -> np.ndarray:
    """The pixels of a decoded ``image`` as uint8 ``[H, W, 3]`` (see the module's
    docstring for each mode); its orientation as it is (see :func:`upright`)."""
    mode = image.mode
    if mode == "RGB":
        return np.array(image)
    if mode in SIXTEEN_BIT_MODES or mode in ("I", "F"):
        top = 1.0 if mode == "F" else SIXTEEN_BIT_MAX
        gray = _to_8_bit(np.asarray(image), top)
        return np.repeat(gray[:, :, None], 3, axis=2)
    if image.has_transparency_data:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*BACKGROUND, 255))
        return np.array(Image.alpha_composite(background, rgba).convert("RGB"))
    return np.array(image.convert("RGB"))

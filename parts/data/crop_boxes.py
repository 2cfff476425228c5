"""Random resized crop boxes drawn from given uniform numbers, as torchvision draws them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

CROP_ASPECT = (3 / 4, 4 / 3)
"""Aspect-ratio range (width / height) of the random resized crops, torchvision's default."""

CENTER_CROP_FRACTION = 0.875
"""Clean images are resized to ``size / 0.875`` on the short side, then center-cropped."""

CROP_TRIES = 10
"""Boxes tried before the central fallback, as torchvision's ``RandomResizedCrop``."""

CROP_UNIFORMS = 2 * CROP_TRIES + 2
"""Uniform numbers one box takes: area and aspect ratio per try, then the position."""


class Box(NamedTuple):
    """A crop box in pixels of an image: ``top``, ``left``, ``height``, ``width``."""

    top: int
    left: int
    height: int
    width: int


def random_resized_box(
    uniforms: Sequence[float],
    height: int,
    width: int,
    scale: tuple[float, float],
    ratio: tuple[float, float] = CROP_ASPECT,
) -> Box:
    """The random resized crop box of a ``height`` x ``width`` image made from
    :data:`CROP_UNIFORMS` numbers in [0, 1).

    torchvision's ``RandomResizedCrop.get_params`` with its random draws replaced by
    ``uniforms``: up to :data:`CROP_TRIES` tries of an area fraction uniform in ``scale``
    and an aspect ratio log-uniform in ``ratio``, the first box that fits placed
    uniformly; when none fits, the largest central box whose aspect ratio is within
    ``ratio``.
    """
    area = height * width
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for attempt in range(CROP_TRIES):
        u_area, u_ratio = uniforms[2 * attempt], uniforms[2 * attempt + 1]
        target = area * (scale[0] + (scale[1] - scale[0]) * u_area)
        aspect = math.exp(log_low + (log_high - log_low) * u_ratio)
        box_width = round(math.sqrt(target * aspect))
        box_height = round(math.sqrt(target / aspect))
        if 0 < box_width <= width and 0 < box_height <= height:
            u_top, u_left = uniforms[2 * CROP_TRIES], uniforms[2 * CROP_TRIES + 1]
            top = min(int(u_top * (height - box_height + 1)), height - box_height)
            left = min(int(u_left * (width - box_width + 1)), width - box_width)
            return Box(top, left, box_height, box_width)
    aspect = width / height
    if aspect < ratio[0]:
        box_width, box_height = width, round(width / ratio[0])
    elif aspect > ratio[1]:
        box_height, box_width = height, round(height * ratio[1])
    else:
        box_width, box_height = width, height
    return Box((height - box_height) // 2, (width - box_width) // 2, box_height, box_width)


def center_box(height: int, width: int, size: int, fraction: float) -> tuple[tuple[int, int], Box]:
    """The evaluation view of a ``height`` x ``width`` image: the size its short side is
    resized to (``round(size / fraction)``; the long side in proportion, as torchvision's
    ``Resize``), and the central ``size`` x ``size`` box of the resized image (as
    torchvision's ``CenterCrop``)."""
    short = round(size / fraction)
    if height <= width:
        resized = (short, int(short * width / height))
    else:
        resized = (int(short * height / width), short)
    top = round((resized[0] - size) / 2.0)
    left = round((resized[1] - size) / 2.0)
    return resized, Box(top, left, size, size)

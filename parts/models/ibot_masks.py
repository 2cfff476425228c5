"""Block-wise patch masks of iBOT and DINOv2 (the masking of BEiT, Bao et al., 2022).

A mask of ``count`` patches on a ``rows x cols`` grid is grown from rectangles: each
rectangle has an area drawn between ``MIN_BLOCK_PATCHES`` and what is still missing
(at most half the grid), an aspect ratio drawn log-uniformly in ``[0.3, 1 / 0.3]``,
and a place drawn uniformly on the grid; it is kept when it adds at least one new
patch without going past the target, and up to ``ATTEMPTS`` rectangles are tried per
block. Growing stops at the target or when no attempt adds a patch, so a mask can
hold a few patches fewer than asked.
"""

from __future__ import annotations

import math
import random

import torch
from torch import Tensor

from hookbus.engine.process import distributed

MIN_BLOCK_PATCHES = 4
"""The smallest area (in patches) a rectangle is drawn with."""

ATTEMPTS = 10
"""Rectangles tried for each block before growing stops."""

ASPECT_RANGE = (0.3, 1 / 0.3)
"""The range of a rectangle's height / width, drawn log-uniformly."""


def block_mask(rng: random.Random, rows: int, cols: int, count: int) -> Tensor:
    """A mask ``[rows * cols]`` (True: masked, row by row) of at most ``count`` patches
    grown from rectangles (see the module), drawn from ``rng``."""
    mask = torch.zeros(rows, cols, dtype=torch.bool)
    largest = max(1, (rows * cols) // 2)
    log_low, log_high = (math.log(bound) for bound in ASPECT_RANGE)
    masked = 0
    while masked < count:
        room = min(count - masked, largest)
        added = 0
        for _ in range(ATTEMPTS):
            area = rng.uniform(MIN_BLOCK_PATCHES, room)
            aspect = math.exp(rng.uniform(log_low, log_high))
            height = round(math.sqrt(area * aspect))
            width = round(math.sqrt(area / aspect))
            if not (0 < height < rows and 0 < width < cols):
                continue
            top = rng.randint(0, rows - height)
            left = rng.randint(0, cols - width)
            block = mask[top : top + height, left : left + width]
            new = height * width - int(block.sum())
            if 0 < new <= room:
                block.fill_(True)
                added = new
                break
        if not added:
            break
        masked += added
    return mask.flatten()


def batch_masks(
    rng: random.Random,
    batch: int,
    rows: int,
    cols: int,
    probability: float,
    ratio_range: tuple[float, float],
) -> Tensor:
    """Masks ``[batch, rows * cols]`` of a batch of global views, DINOv2's way.

    ``int(batch * probability)`` of the images are masked: the ratio range is cut into
    that many equal parts and image ``i`` masks ``int(N * r_i)`` patches, ``r_i`` drawn
    uniformly in part ``i`` (so the ratios spread over the whole range); the other
    images are not masked, and the rows are shuffled.
    """
    low, high = ratio_range
    patches = rows * cols
    masked = int(batch * probability)
    bounds = [low + (high - low) * i / masked for i in range(masked + 1)] if masked else []
    counts = [int(patches * rng.uniform(bounds[i], bounds[i + 1])) for i in range(masked)]
    masks = [block_mask(rng, rows, cols, count) for count in counts]
    masks += [torch.zeros(patches, dtype=torch.bool)] * (batch - masked)
    rng.shuffle(masks)
    return torch.stack(masks)


def draw_batch_masks(
    batch: int,
    rows: int,
    cols: int,
    probability: float,
    ratio_range: tuple[float, float],
    device: torch.device | str,
) -> Tensor:
    """:func:`batch_masks` on ``device``, from a seed drawn from torch's global (CPU)
    generator, whose state every checkpoint carries: a resumed run draws the same
    masks. Each rank draws the same seed (the generators stay in step) and mixes in its
    rank, so the ranks' masks differ, as each GPU's collate does in DINOv2."""
    seed = int(torch.randint(0, 2**62, (1,)))
    rng = random.Random(seed * 65_537 + distributed.rank())
    return batch_masks(rng, batch, rows, cols, probability, ratio_range).to(device)

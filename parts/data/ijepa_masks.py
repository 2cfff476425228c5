"""I-JEPA's multi-block masks (Assran et al., "Self-Supervised Learning from Images with
a Joint-Embedding Predictive Architecture", 2023), drawn in the collate.

Per batch, one target block size and one context block size; per image, ``targets``
target blocks (rectangles of patches, which may overlap each other) and one context
block, from which every target patch is removed: the context never sees a target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from hookbus.engine.errors import ConfigError
from hookbus.parts.config import Config
from hookbus.parts.data.seeding import mix_seed
from hookbus.parts.data.shared import SharedInt

MASK_STREAM = 1
"""Last value in the seed of a batch's masks: a stream apart from its views'."""

CONTEXT_TRIES = 20
"""Context blocks drawn for one set of target blocks before the targets are drawn anew."""

TARGET_TRIES = 50
"""Sets of target blocks drawn for one image before the settings are declared unworkable."""

SETUP_DRAWS = (8, 8)
"""Batches, and images in each, whose masks :func:`check_drawable` draws at setup."""

BlockPlacement = Literal["anywhere", "authors"]
"""Where a block's top-left corner may fall: ``anywhere`` it fits (``top`` in
``0 .. H - h``), or as the authors' code draws it (``top`` in ``0 .. H - h - 1``), so that
no block touches the last row or column of the grid."""


@dataclass(frozen=True)
class BlockMaskSettings:
    """The sizes of the blocks, as fractions of the patch grid, and their counts.

    ``target_scale`` and ``target_aspect_ratio`` (height / width) bound the target
    blocks, ``context_scale`` the context block (square); the paper's: 4 targets of
    0.15-0.2 of the image at aspect ratios 0.75-1.5, a context of 0.85-1.0.
    ``min_context`` is the fewest patches a context may keep once the targets are cut
    out of it. ``placement`` says where a block may lie (:data:`BlockPlacement`).
    """

    targets: int = 4
    target_scale: tuple[float, float] = (0.15, 0.2)
    target_aspect_ratio: tuple[float, float] = (0.75, 1.5)
    context_scale: tuple[float, float] = (0.85, 1.0)
    min_context: int = 10
    placement: BlockPlacement = "anywhere"


def block_settings(cfg: Config) -> BlockMaskSettings:
    """The block settings of ``loss.ijepa``."""
    section = cfg.loss.ijepa
    return BlockMaskSettings(
        targets=section.target_blocks,
        target_scale=section.target_scale,
        target_aspect_ratio=section.target_aspect_ratio,
        context_scale=section.context_scale,
        min_context=section.min_context_patches,
        placement=section.block_placement,
    )


def block_size(
    generator: torch.Generator,
    grid: tuple[int, int],
    scale: tuple[float, float],
    aspect_ratio: tuple[float, float],
) -> tuple[int, int]:
    """The height and width in patches of a block: one uniform draw ``u`` sets both the
    scale ``s`` and the aspect ratio ``a`` (``lo + u (hi - lo)`` each), as the authors'
    code does; the block holds ``int(s * H * W)`` patches, ``h = round(sqrt(n a))``,
    ``w = round(sqrt(n / a))``, each at least 1 and less than the grid's side (the
    authors' bound: a block never spans the whole grid)."""
    height, width = grid
    u = torch.rand(1, generator=generator).item()
    patches = int((scale[0] + u * (scale[1] - scale[0])) * height * width)
    ratio = aspect_ratio[0] + u * (aspect_ratio[1] - aspect_ratio[0])
    h = round(math.sqrt(patches * ratio))
    w = round(math.sqrt(patches / ratio))
    return min(max(h, 1), max(height - 1, 1)), min(max(w, 1), max(width - 1, 1))


def place_block(
    generator: torch.Generator,
    grid: tuple[int, int],
    size: tuple[int, int],
    placement: BlockPlacement = "anywhere",
) -> Tensor:
    """A boolean ``[H, W]`` map of one block of ``size`` at a uniformly drawn position:
    ``anywhere`` it fits (``top`` in ``0 .. H - h``, ``left`` in ``0 .. W - w``), or, with
    ``placement`` ``authors``, ``top`` in ``0 .. H - h - 1`` and ``left`` in
    ``0 .. W - w - 1``, as the authors' code: the last row and column stay free (a side
    of the grid's full length, which :func:`block_size` never gives a grid of 2 or more,
    is placed at 0)."""
    (height, width), (h, w) = grid, size
    spare = 0 if placement == "anywhere" else 1
    top = int(torch.randint(0, max(height - h + 1 - spare, 1), (1,), generator=generator))
    left = int(torch.randint(0, max(width - w + 1 - spare, 1), (1,), generator=generator))
    block = torch.zeros(height, width, dtype=torch.bool)
    block[top : top + h, left : left + w] = True
    return block


def image_masks(
    generator: torch.Generator,
    grid: tuple[int, int],
    target_size: tuple[int, int],
    context_size: tuple[int, int],
    settings: BlockMaskSettings,
) -> tuple[Tensor, list[Tensor]]:
    """One image's context (indices of its patches, row by row, ascending) and target
    blocks (one index tensor each): the context block less every target patch, holding
    at least ``settings.min_context`` patches. ``ValueError`` when no draw leaves that
    many."""
    for _ in range(TARGET_TRIES):
        blocks = [
            place_block(generator, grid, target_size, settings.placement)
            for _ in range(settings.targets)
        ]
        covered = torch.stack(blocks).any(dim=0)
        for _ in range(CONTEXT_TRIES):
            context = place_block(generator, grid, context_size, settings.placement) & ~covered
            if int(context.sum()) >= settings.min_context:
                targets = [block.flatten().nonzero().squeeze(1) for block in blocks]
                return context.flatten().nonzero().squeeze(1), targets
    raise ValueError(
        f"no context block of {context_size[0]}x{context_size[1]} patches keeps "
        f"loss.ijepa.min_context_patches={settings.min_context} patches outside "
        f"{settings.targets} target blocks of {target_size[0]}x{target_size[1]} on a "
        f"{grid[0]}x{grid[1]} grid: lower it, or loss.ijepa.target_blocks / target_scale"
    )


def batch_masks(
    generator: torch.Generator, batch: int, grid: tuple[int, int], settings: BlockMaskSettings
) -> tuple[Tensor, Tensor]:
    """The masks of a batch of ``batch`` images: ``context`` ``[B, Kc]`` and ``targets``
    ``[B, M, Kt]`` (patch indices, row by row). The block sizes are drawn once for the
    batch (targets first, then the context, at aspect ratio 1), the blocks per image
    (:func:`image_masks`); every context is cut to the batch's smallest, keeping its
    first patches in row order, as the authors' collate does, so that they stack."""
    target_size = block_size(generator, grid, settings.target_scale, settings.target_aspect_ratio)
    context_size = block_size(generator, grid, settings.context_scale, (1.0, 1.0))
    drawn = [
        image_masks(generator, grid, target_size, context_size, settings) for _ in range(batch)
    ]
    keep = min(len(context) for context, _ in drawn)
    context = torch.stack([context[:keep] for context, _ in drawn])
    targets = torch.stack([torch.stack(blocks) for _, blocks in drawn])
    return context, targets


def check_drawable(grid: tuple[int, int], settings: BlockMaskSettings) -> None:
    """Refuse, with a :class:`~hookbus.engine.errors.ConfigError` naming the settings,
    block settings that leave no context on ``grid``: a grid under 2 x 2, or masks that
    cannot be drawn for :data:`SETUP_DRAWS` batches (a fixed seed). Called when the
    loaders are built (``hookbus validate``, a run's setup), so that a grid too small
    for the blocks is refused in one line there, not in a loader worker after the run
    started."""
    if min(grid) < 2:
        raise ConfigError(
            f"loss.ijepa: I-JEPA's blocks need a patch grid of at least 2x2, and "
            f"data.image_size over the ViT's patch size gives {grid[0]}x{grid[1]}: raise "
            "data.image_size or lower model.backbone.vit.patch_size"
        )
    generator = torch.Generator().manual_seed(0)
    batches, images = SETUP_DRAWS
    for _ in range(batches):
        try:
            batch_masks(generator, images, grid, settings)
        except ValueError as exc:
            raise ConfigError(f"loss.ijepa: masks cannot be drawn: {exc}") from None


class BlockMaskCollate:
    """A collate function that adds I-JEPA's masks to the batch of ``collate``.

    The batch gets ``"context_keep"`` ``[B, Kc]`` and ``"target_keep"`` ``[B, M, Kt]``
    (:func:`batch_masks` on a ``grid`` of patches). The masks are drawn from a
    ``torch.Generator`` seeded from ``(seed, epoch, index of the batch's first sample,``
    :data:`MASK_STREAM` ``)``: like the views, a batch gets the same masks in whatever
    process or worker it is collated, and a run resumed mid-epoch rebuilds them, with no
    state to checkpoint. :meth:`set_epoch` passes the epoch to ``collate`` too; it is
    kept in shared memory, so it reaches persistent DataLoader workers.
    """

    epoch = SharedInt()
    """The epoch in the seeds of the masks, shared with DataLoader workers."""

    def __init__(
        self,
        collate: Callable[[Sequence], dict],
        grid: tuple[int, int],
        settings: BlockMaskSettings,
        seed: int,
    ) -> None:
        if min(grid) < 2:
            raise ValueError(f"I-JEPA's blocks need a patch grid of at least 2x2, not {grid}")
        self.collate = collate
        self.grid = grid
        self.settings = settings
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seeds of the masks (and of ``collate``'s views)."""
        self.epoch = epoch
        set_epoch = getattr(self.collate, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)

    def __call__(self, samples: Sequence) -> dict:
        """``collate``'s batch of ``samples`` with the masks."""
        batch = self.collate(samples)
        seed = mix_seed(self.seed, self.epoch, int(samples[0][2]), MASK_STREAM)
        generator = torch.Generator().manual_seed(seed)
        batch["context_keep"], batch["target_keep"] = batch_masks(
            generator, len(samples), self.grid, self.settings
        )
        return batch

"""The DataLoader collate function that stacks samples and makes the augmented views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor

from hookbus.parts.data.augment import BatchAugment
from hookbus.parts.data.seeding import mix_seed
from hookbus.parts.data.shared import SharedInt

Sample = tuple[Tensor, Tensor | int, int]
"""One data-set item: ``(image, label, index)``."""

Batch = dict[str, Tensor | list[Tensor] | list[str]]
"""``{"views": [B, C, S, S] per view, "image": [B, C, S, S], "label": [B], "index": [B]}``
(and ``"unreadable"``, the lines naming the images a batch skipped, when it skipped any:
:mod:`~hookbus.parts.data.unreadable`)."""


class ViewCollate:
    """Stack ``(image, label, index)`` samples into a batch dict, with augmented views.

    The batch holds ``"label"`` and ``"index"`` (LongTensors ``[B]``), plus
    ``"views"`` (``num_views`` augmented copies of the images, then
    ``num_small_views`` made by ``small_augment`` at ``small_size`` pixels: multi-crop)
    when ``with_views`` and ``"image"`` (the clean images) when ``with_image``. With
    ``adapted_sizes`` ``(global, small)`` and :meth:`set_adapted` the views are cut at
    those sides instead (DINOv3's adaptation phase).

    Reproducibility: the views of a batch are drawn from a ``torch.Generator`` seeded
    from ``(seed, epoch, index of the batch's first sample)``, not from a stream that
    runs through the epoch. A batch therefore gets the same views whichever process or
    DataLoader worker collates it, and in whatever order; a run resumed in the middle
    of an epoch (same epoch, sampler skipping the batches already done) rebuilds the
    same batches and so the same views. Call :meth:`set_epoch` before iterating the
    loader of each epoch; the epoch is kept in shared memory, so it reaches DataLoader
    workers, persistent ones included.
    Two batches starting with the same sample (possible only with the wrap-around
    padding of a sharded sampler) share their random parameters.
    """

    epoch = SharedInt()
    """The epoch in the seeds, shared with DataLoader workers (persistent ones too)."""
    adapted = SharedInt()
    """1 in the adaptation phase (``adapted_sizes``), shared as the epoch is."""

    def __init__(
        self,
        augment: BatchAugment | None,
        num_views: int,
        seed: int,
        with_views: bool = True,
        with_image: bool = False,
        *,
        small_augment: BatchAugment | None = None,
        num_small_views: int = 0,
        small_size: int = 0,
        adapted_sizes: tuple[int, int] | None = None,
    ) -> None:
        if with_views and augment is None:
            raise ValueError("ViewCollate needs an augment to make views (with_views=True)")
        if with_views and num_views < 1:
            raise ValueError(f"num_views must be at least 1, got {num_views}")
        if num_small_views and (small_augment is None or small_size < 1):
            raise ValueError("small views need small_augment and a positive small_size")
        self.augment = augment
        self.num_views = num_views
        self.small_augment = small_augment
        self.num_small_views = num_small_views
        self.small_size = small_size
        self.seed = seed
        self.with_views = with_views
        self.with_image = with_image
        self.epoch = 0
        self.adapted_sizes = adapted_sizes
        self.adapted = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seeds of the batches collated from now on."""
        self.epoch = epoch

    def set_adapted(self, adapted: bool) -> None:
        """Cut the views at the adaptation phase's sizes (DINOv3's) from now on, or at
        the first sizes; shared with DataLoader workers as the epoch is."""
        if adapted and self.adapted_sizes is None:
            raise ValueError("this collate function was made without adaptation sizes")
        self.adapted = int(adapted)

    def __call__(self, samples: Sequence[Sample]) -> Batch:
        """The batch dict of ``samples``."""
        images = torch.stack([image for image, _, _ in samples])
        batch: Batch = {
            "label": torch.tensor([int(label) for _, label, _ in samples], dtype=torch.long),
            "index": torch.tensor([index for _, _, index in samples], dtype=torch.long),
        }
        if self.with_views:
            generator = torch.Generator().manual_seed(
                mix_seed(self.seed, self.epoch, samples[0][2])
            )
            # __init__ refused views without an augment, small views without theirs.
            augment = cast(BatchAugment, self.augment)
            small_augment = cast(BatchAugment, self.small_augment)
            size, small_size = None, self.small_size
            if self.adapted and self.adapted_sizes is not None:
                size, small_size = self.adapted_sizes
            views = [augment(images, generator, size) for _ in range(self.num_views)]
            views += [
                small_augment(images, generator, small_size) for _ in range(self.num_small_views)
            ]
            batch["views"] = views
        if self.with_image:
            batch["image"] = images
        return batch

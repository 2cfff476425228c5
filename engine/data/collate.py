"""The DataLoader collate function that stacks samples and makes the augmented views."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from engine.data.augment import BatchAugment
from engine.data.seeding import mix_seed

Sample = tuple[Tensor, Tensor | int, int]
"""One data-set item: ``(image, label, index)``."""

Batch = dict[str, Tensor | list[Tensor]]
"""``{"views": [B, C, S, S] per view, "image": [B, C, S, S], "label": [B], "index": [B]}``."""


class ViewCollate:
    """Stack ``(image, label, index)`` samples into a batch dict, with augmented views.

    The batch holds ``"label"`` and ``"index"`` (LongTensors ``[B]``), plus
    ``"views"`` (``num_views`` augmented copies of the images) when ``with_views`` and
    ``"image"`` (the clean images) when ``with_image``.

    Reproducibility: the views of a batch are drawn from a ``torch.Generator`` seeded
    from ``(seed, epoch, index of the batch's first sample)``, not from a stream that
    runs through the epoch. A batch therefore gets the same views whichever process or
    DataLoader worker collates it, and in whatever order; a run resumed in the middle
    of an epoch (same epoch, sampler skipping the batches already done) rebuilds the
    same batches and so the same views. Call :meth:`set_epoch` before iterating the
    loader of each epoch; worker processes copy this object when the loader's
    iterator starts, so the epoch reaches them as long as workers are not persistent.
    Two batches starting with the same sample (possible only with the wrap-around
    padding of a sharded sampler) share their random parameters.
    """

    def __init__(
        self,
        augment: BatchAugment | None,
        num_views: int,
        seed: int,
        with_views: bool = True,
        with_image: bool = False,
    ) -> None:
        if with_views and augment is None:
            raise ValueError("ViewCollate needs an augment to make views (with_views=True)")
        if with_views and num_views < 1:
            raise ValueError(f"num_views must be at least 1, got {num_views}")
        self.augment = augment
        self.num_views = num_views
        self.seed = seed
        self.with_views = with_views
        self.with_image = with_image
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seeds of the batches collated from now on."""
        self.epoch = epoch

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
            batch["views"] = [self.augment(images, generator) for _ in range(self.num_views)]
        if self.with_image:
            batch["image"] = images
        return batch

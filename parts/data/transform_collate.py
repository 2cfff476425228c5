"""The collate function of images that differ in size: per-image transforms, then stacking."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from hookbus.parts.data.collate import Batch, Sample
from hookbus.parts.data.seeding import mix_seed
from hookbus.parts.data.shared import SharedInt
from hookbus.parts.data.unreadable import UNREADABLE_KEY, Unreadable, stand_ins

ImageTransform = Callable[[Tensor], Tensor]
"""A per-image transform: a uint8 image ``[C, H, W]`` to a float image of a fixed size."""


class TransformCollate:
    """Stack ``(image, label, index)`` samples into a batch dict, transforming each image.

    ``"views"`` holds one stacked tensor per entry of ``view_transforms`` (the large
    views, then the small ones of multi-crop), when given; ``"image"`` the stacked
    ``clean_transform`` of the images, when given; ``"label"`` and ``"index"`` always.
    An image the data set could not read (an
    :class:`~hookbus.parts.data.unreadable.Unreadable`) takes the pixels and label of
    another of the batch (:func:`~hookbus.parts.data.unreadable.stand_ins`), its reason
    listed under ``"unreadable"``.

    Reproducibility as :class:`hookbus.parts.data.ViewCollate`: the transforms draw from
    torch's global generator, forked and seeded from ``(seed, epoch, index of the
    batch's first sample)`` for the batch, so a batch gets the same views in any worker
    and after a resume, and the caller's random state is left untouched. With
    ``adapted_transforms`` (the view transforms at other sizes) and :meth:`set_adapted`
    those make the views instead (DINOv3's adaptation phase).
    """

    epoch = SharedInt()
    """The epoch in the seeds, shared with DataLoader workers (persistent ones too)."""
    adapted = SharedInt()
    """1 in the adaptation phase (``adapted_transforms``), shared as the epoch is."""

    def __init__(
        self,
        view_transforms: Sequence[ImageTransform],
        clean_transform: ImageTransform | None,
        seed: int,
        adapted_transforms: Sequence[ImageTransform] | None = None,
    ) -> None:
        if not view_transforms and clean_transform is None:
            raise ValueError("TransformCollate needs view transforms or a clean transform")
        self.view_transforms = list(view_transforms)
        self.clean_transform = clean_transform
        self.seed = seed
        self.epoch = 0
        self.adapted_transforms = None if adapted_transforms is None else list(adapted_transforms)
        self.adapted = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seeds of the batches collated from now on."""
        self.epoch = epoch

    def set_adapted(self, adapted: bool) -> None:
        """Cut the views at the adaptation phase's sizes (DINOv3's) from now on, or at
        the first sizes; shared with DataLoader workers as the epoch is."""
        if adapted and self.adapted_transforms is None:
            raise ValueError("this collate function was made without adaptation sizes")
        self.adapted = int(adapted)

    def __call__(self, samples: Sequence[Sample]) -> Batch:
        """The batch dict of ``samples``."""
        reasons: list[str | None] = [
            image.message if isinstance(image, Unreadable) else None for image, _, _ in samples
        ]
        rows = stand_ins(reasons) if any(reasons) else range(len(samples))
        images = [samples[row][0] for row in rows]
        batch: Batch = {
            "label": torch.tensor([int(samples[row][1]) for row in rows], dtype=torch.long),
            "index": torch.tensor([index for _, _, index in samples], dtype=torch.long),
        }
        if any(reasons):
            batch[UNREADABLE_KEY] = [reason for reason in reasons if reason is not None]
        transforms = self.view_transforms
        if self.adapted and self.adapted_transforms is not None:
            transforms = self.adapted_transforms
        if transforms:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(mix_seed(self.seed, self.epoch, samples[0][2]))
                batch["views"] = [
                    torch.stack([transform(image) for image in images]) for transform in transforms
                ]
        if self.clean_transform is not None:
            batch["image"] = torch.stack([self.clean_transform(image) for image in images])
        return batch

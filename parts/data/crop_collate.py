"""The collate function of the ``crop_first`` pipeline: each view cut from its image
first, at the size it needs, then the color augmentations on the uint8 crops."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import get_worker_info

from hookbus.engine.config import TorchvisionAugmentConfig
from hookbus.engine.errors import DataError
from hookbus.parts.data.collate import Batch, Sample
from hookbus.parts.data.crop_boxes import (
    CENTER_CROP_FRACTION,
    CROP_UNIFORMS,
    Box,
    center_box,
    random_resized_box,
)
from hookbus.parts.data.image_decode import JPEG_REDUCTIONS, SourceImage
from hookbus.parts.data.photometric import (
    COLOR_UNIFORMS,
    augment_colors,
    draw_color_params,
    normalize,
)
from hookbus.parts.data.seeding import mix_seed
from hookbus.parts.data.shared import SharedInt
from hookbus.parts.data.unreadable import UNREADABLE_KEY, stand_ins

VIEW_UNIFORMS = CROP_UNIFORMS + 1 + COLOR_UNIFORMS
"""Uniform numbers one view of one image takes: its crop, its flip, its colors."""


class ViewSpec(NamedTuple):
    """One view of every image: its side in pixels, the area range of its crop, and
    its augmentations (probabilities for this view)."""

    size: int
    crop_scale: tuple[float, float]
    augment: TorchvisionAugmentConfig


def _scaled(box: Box, scale_y: float, scale_x: float, height: int, width: int) -> Box:
    """``box`` in the pixels of the image decoded at ``scale`` of its size."""
    top, left = round(box.top * scale_y), round(box.left * scale_x)
    bottom = min(height, max(top + 1, round((box.top + box.height) * scale_y)))
    right = min(width, max(left + 1, round((box.left + box.width) * scale_x)))
    return Box(top, left, bottom - top, right - left)


def _batch_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """An uninitialised tensor for a batch: in a DataLoader worker, in shared memory
    from the start (as torch's default collate function makes it), so sending the batch
    to the training process copies nothing."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    storage = torch.empty(0, dtype=dtype)._typed_storage()._new_shared(math.prod(shape))
    return torch.empty(0, dtype=dtype).new(storage).view(shape)


def _resize(pixels: Tensor, size: tuple[int, int]) -> Tensor:
    """uint8 ``pixels [1, 3, h, w]`` resized to ``size`` (bilinear, antialiased: the
    torchvision ``Resize`` of uint8 tensors)."""
    return F.interpolate(pixels, size=size, mode="bilinear", antialias=True, align_corners=False)


class CropFirstCollate:
    """Stack ``(image, label, index)`` samples into a batch dict, cutting every view of
    an image from it first.

    For each image (a file path, or a uint8 tensor ``[3, H, W]``): the crop box and
    flip of each view in ``views`` are drawn; a JPEG file is decoded at 1/2, 1/4 or
    1/8 of its size when every box (and the clean image) still has at least the
    pixels of its view there; each box is resized to its view (bilinear,
    antialiased) and flipped, in uint8. With ``finish_views`` the color augmentations
    (:func:`hookbus.parts.data.photometric.augment_colors`) and the normalisation follow
    at once, image by image, while the crops are in the cache, and ``"views"`` holds
    float32 views; without it ``"views"`` holds the uint8 crops and
    ``"view_params"`` their color parameters, for
    :func:`hookbus.parts.data.photometric.finish_views` on the training device.
    ``"image"`` holds the clean images at ``clean_size`` when given (resized to
    ``clean_size / 0.875`` on the short side, center-cropped, normalised). With
    ``skip_unreadable`` an image that cannot be read takes the pixels and label of
    another of the batch, cut with its own row's random boxes
    (:func:`~hookbus.parts.data.unreadable.stand_ins`), its reason listed under
    ``"unreadable"``; without it, its :class:`~hookbus.engine.errors.DataError` stops
    the batch.

    Reproducibility as :class:`hookbus.parts.data.ViewCollate`: every random number of
    a batch comes from one ``torch.Generator`` seeded from ``(seed, epoch, index of the
    batch's first sample)``, so a batch gets the same views in any worker and after a
    resume. With ``adapted_views`` (the same views at other sizes) and
    :meth:`set_adapted` those are cut instead (DINOv3's adaptation phase).
    """

    epoch = SharedInt()
    """The epoch in the seeds, shared with DataLoader workers (persistent ones too)."""
    adapted = SharedInt()
    """1 in the adaptation phase (``adapted_views``), shared as the epoch is."""

    def __init__(
        self,
        views: Sequence[ViewSpec],
        clean_size: int | None,
        cfg: TorchvisionAugmentConfig,
        seed: int,
        finish_views: bool = True,
        skip_unreadable: bool = False,
        adapted_views: Sequence[ViewSpec] | None = None,
    ) -> None:
        if not views and clean_size is None:
            raise ValueError("CropFirstCollate needs views or a clean size")
        if adapted_views is not None and len(adapted_views) != len(views):
            raise ValueError("the adaptation phase's views must be as many as the views")
        self.views = self._first_views = list(views)
        self.adapted_views = None if adapted_views is None else list(adapted_views)
        self.adapted = 0
        self.clean_size = clean_size
        self.mean, self.std = cfg.mean, cfg.std
        self.seed = seed
        self.finish_views = finish_views
        self.skip_unreadable = skip_unreadable
        self.epoch = 0
        self._scratch: dict[tuple[int, int], Tensor] = {}
        self._take_views()

    def _take_views(self) -> None:
        # The views of the phase (the adaptation phase's or the first) and their groups
        # of one size.
        adapted = self.adapted_views if self.adapted else None
        self.views = self._first_views if adapted is None else adapted
        sizes = [view.size for view in self.views]
        self._groups = [
            [number for number, size in enumerate(sizes) if size == side]
            for side in dict.fromkeys(sizes)
        ]

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seeds of the batches collated from now on."""
        self.epoch = epoch

    def set_adapted(self, adapted: bool) -> None:
        """Cut the views at the adaptation phase's sizes (DINOv3's) from now on, or at
        the first sizes; shared with DataLoader workers as the epoch is."""
        if adapted and self.adapted_views is None:
            raise ValueError("this collate function was made without adaptation sizes")
        self.adapted = int(adapted)

    def __call__(self, samples: Sequence[Sample]) -> Batch:
        """The batch dict of ``samples``."""
        if (self.views is self.adapted_views) != bool(self.adapted):
            self._take_views()  # a worker's copy learns of the phase here
        count = len(samples)
        batch: Batch = {
            "label": torch.tensor([int(label) for _, label, _ in samples], dtype=torch.long),
            "index": torch.tensor([index for _, _, index in samples], dtype=torch.long),
        }
        generator = torch.Generator().manual_seed(mix_seed(self.seed, self.epoch, samples[0][2]))
        uniforms = torch.rand(
            count, len(self.views), VIEW_UNIFORMS, generator=generator, dtype=torch.float64
        )
        params = [
            draw_color_params(uniforms[:, number, CROP_UNIFORMS + 1 :], view.augment)
            for number, view in enumerate(self.views)
        ]
        geometry = uniforms[:, :, : CROP_UNIFORMS + 1].tolist()
        dtype = torch.float32 if self.finish_views else torch.uint8
        views = [_batch_tensor((count, 3, view.size, view.size), dtype) for view in self.views]
        clean = None
        if self.clean_size is not None:
            clean = _batch_tensor((count, 3, self.clean_size, self.clean_size), torch.float32)
        reasons: list[str | None] = [None] * count
        for row, (image, _, index) in enumerate(samples):
            try:
                self._cut(_source(image, index), geometry[row], row, views, params, clean)
            except DataError as exc:
                if not self.skip_unreadable:
                    raise
                reasons[row] = str(exc)
        if any(reasons):
            rows = stand_ins(reasons)
            for row, reason in enumerate(reasons):
                if reason is not None:
                    image, _, index = samples[rows[row]]
                    self._cut(_source(image, index), geometry[row], row, views, params, clean)
            labels = [int(samples[row][1]) for row in rows]
            batch["label"] = torch.tensor(labels, dtype=torch.long)
            batch[UNREADABLE_KEY] = [reason for reason in reasons if reason is not None]
        if self.views:
            batch["views"] = views
            if not self.finish_views:
                batch["view_params"] = params
        if clean is not None:
            batch["image"] = clean
        return batch

    def _cut(
        self,
        source: SourceImage,
        geometry: list[list[float]],
        row: int,
        views: list[Tensor],
        params: list[Tensor],
        clean: Tensor | None,
    ) -> None:
        """Cut the views (and the clean image) of one image into row ``row``."""
        height, width = source.height, source.width
        boxes = [
            random_resized_box(numbers, height, width, view.crop_scale)
            for numbers, view in zip(geometry, self.views, strict=True)
        ]
        needs = [
            (box.height, box.width, view.size) for box, view in zip(boxes, self.views, strict=True)
        ]
        if self.clean_size is not None:
            resized, center = center_box(height, width, self.clean_size, CENTER_CROP_FRACTION)
            needs.append((height, width, min(resized)))
        pixels = source.pixels(_reduction(source, needs))
        scale_y, scale_x = pixels.shape[2] / height, pixels.shape[3] / width
        crops = []
        for number, (box, view) in enumerate(zip(boxes, self.views, strict=True)):
            top, left, box_height, box_width = _scaled(
                box, scale_y, scale_x, pixels.shape[2], pixels.shape[3]
            )
            region = pixels[:, :, top : top + box_height, left : left + box_width]
            crop = _resize(region, (view.size, view.size))
            if geometry[number][CROP_UNIFORMS] < view.augment.flip_prob:
                crop = crop.flip(-1)
            crops.append(crop)
            if not self.finish_views:
                views[number][row : row + 1].copy_(crop)
        if self.finish_views:
            for group in self._groups:
                self._finish(group, crops, row, views, params)
        if clean is not None:
            top, left, size, _ = center
            image = _resize(pixels, resized)[:, :, top : top + size, left : left + size]
            out = torch.mul(image, 1 / 255, out=clean[row : row + 1])
            normalize(out, self.mean, self.std)

    def _finish(
        self,
        group: list[int],
        crops: list[Tensor],
        row: int,
        views: list[Tensor],
        params: list[Tensor],
    ) -> None:
        """Augment the crops of one image's views of one size together, in a scratch
        buffer that stays in the cache from image to image, and write them normalised
        into row ``row`` of their views."""
        size = self.views[group[0]].size
        key = (len(group), size)
        if key not in self._scratch:
            self._scratch[key] = torch.empty(len(group), 3, size, size)
        scratch = self._scratch[key]
        for slot, number in enumerate(group):
            torch.mul(crops[number], 1 / 255, out=scratch[slot : slot + 1])
        augment_colors(scratch, torch.cat([params[number][row : row + 1] for number in group]))
        for slot, number in enumerate(group):
            normalize(
                scratch[slot : slot + 1], self.mean, self.std, out=views[number][row : row + 1]
            )


def _source(image: object, index: int) -> SourceImage:
    """The image of a sample (a file, its bytes or a tensor), opened."""
    named = getattr(image, "where", None)  # a shard's image bytes name their shard and sample
    where = str(image) if isinstance(image, str | Path) else f"item {index}"
    where = named if isinstance(named, str) else where
    return SourceImage(image, where)  # type: ignore[arg-type]


def _reduction(source: SourceImage, needs: list[tuple[int, int, int]]) -> int:
    """The largest JPEG reduction at which every ``(height, width, side)`` box keeps at
    least ``side`` pixels each way; 1 when none does or the image is not a JPEG file."""
    if not source.reducible:
        return 1
    for reduction in JPEG_REDUCTIONS:
        if all(min(h, w) >= side * reduction for h, w, side in needs):
            return reduction
    return 1

"""Per-image torchvision ``transforms.v2`` pipelines: augmented views and clean images."""

from __future__ import annotations

import torch
from torchvision.transforms import v2

from hookbus.engine.config import TorchvisionAugmentConfig
from hookbus.parts.data.crop_boxes import CENTER_CROP_FRACTION
from hookbus.parts.data.photometric import blur_kernel_size

SOLARIZE_THRESHOLD = 128
"""Solarization inverts pixels at or above this value (uint8 images)."""


def view_transform(
    cfg: TorchvisionAugmentConfig, size: int, crop_scale: tuple[float, float]
) -> v2.Compose:
    """One augmented view of a uint8 image ``[C, H, W]``: ``[C, size, size]`` float32.

    Random resized crop (area ``crop_scale``), horizontal flip, color jitter, grayscale,
    Gaussian blur and solarization with the config's probabilities (the SimCLR / BYOL
    family), then scaled to [0, 1] and normalised with ``mean`` and ``std``. Randomness
    comes from torch's global generator.
    """
    return v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=crop_scale, antialias=True),
            v2.RandomHorizontalFlip(cfg.flip_prob),
            v2.RandomApply([v2.ColorJitter(*cfg.color_jitter)], p=cfg.color_jitter_prob),
            v2.RandomGrayscale(cfg.grayscale_prob),
            v2.RandomApply(
                [v2.GaussianBlur(blur_kernel_size(size), sigma=cfg.blur_sigma)], p=cfg.blur_prob
            ),
            v2.RandomSolarize(SOLARIZE_THRESHOLD, p=cfg.solarize_prob),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(cfg.mean, cfg.std),
        ]
    )


def clean_transform(cfg: TorchvisionAugmentConfig, size: int) -> v2.Compose:
    """The evaluation view of a uint8 image: resized, center-cropped to ``size``, normalised."""
    return v2.Compose(
        [
            v2.Resize(round(size / CENTER_CROP_FRACTION), antialias=True),
            v2.CenterCrop(size),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(cfg.mean, cfg.std),
        ]
    )

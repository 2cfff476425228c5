"""A generated image data set: one oriented stripe pattern per class, for tests and benchmarks."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from hookbus.engine.config import SyntheticDataConfig

SYNTHETIC_SEED = 0
"""The synthetic images are fixed, whatever the run's seed."""


def make_synthetic_images(
    cfg: SyntheticDataConfig, count: int, image_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``count`` images ``[N, channels, S, S]`` (normalised) and labels ``[N]``.

    Class ``c`` of ``K`` is a sine grating at angle ``pi * c / K`` with a random phase
    and a random frequency of 2-4 periods per image, a random tint per channel, and
    Gaussian noise (standard deviation 0.3); labels cycle through the classes.
    """
    labels = torch.arange(count) % cfg.num_classes
    angle = math.pi * labels.float() / cfg.num_classes
    phase = 2 * math.pi * torch.rand(count, generator=generator)
    frequency = 2 + 2 * torch.rand(count, generator=generator)
    tint = 0.5 + torch.rand(count, cfg.channels, generator=generator)
    coords = (torch.arange(image_size).float() + 0.5) / image_size
    y, x = torch.meshgrid(coords, coords, indexing="ij")
    along = torch.cos(angle)[:, None, None] * x + torch.sin(angle)[:, None, None] * y
    pattern = torch.sin(2 * math.pi * frequency[:, None, None] * along + phase[:, None, None])
    images = tint[:, :, None, None] * pattern[:, None]
    images = images + 0.3 * torch.randn(images.shape, generator=generator)
    return (images - images.mean()) / images.std(), labels

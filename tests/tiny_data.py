"""A tiny registered data set for tests; recipes load it with trainer.imports=[tests.tiny_data]."""

from __future__ import annotations

import torch

from hookbus import DATASETS
from hookbus.parts.data import TensorImageDataset

TINY = "tiny_test_images"


def _tiny_split(count: int, seed: int) -> TensorImageDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % 4
    images = torch.randn(count, 1, 8, 8, generator=generator) * 0.1
    images[:, 0, :, :] += labels.view(-1, 1, 1).float()
    return TensorImageDataset(images, labels)


if TINY not in DATASETS:

    @DATASETS.register(TINY)
    def build_tiny(cfg: object) -> tuple[TensorImageDataset, TensorImageDataset]:
        """24 train and 8 test images of 4 classes, 8x8, made from a fixed seed."""
        return _tiny_split(24, 0), _tiny_split(8, 1)

"""Shared fixtures: a tiny registered data set and a config that trains in a second."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.config import Config
from engine.config_io import validate_config
from engine.data import DATASETS, TensorImageDataset

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


def tiny_config(run_dir: Path, **sections: dict) -> Config:
    """A config on the tiny data set: 3 train steps and 1 test step per epoch."""
    raw: dict = {
        "trainer": {"log_frequency": 1},
        "data": {"name": TINY, "image_size": 8, "batch_size": 8, "test_batch_size": 8},
        "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
        "optimizer": {"num_epochs": 2, "warmup_epochs": 0},
        "meters": {"knn": {"k": 3}},
        "checkpoint": {"dir": str(run_dir)},
        "hooks": {"progress_bar": {"enabled": False}},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return validate_config(raw, "tiny test config")


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path / "run")

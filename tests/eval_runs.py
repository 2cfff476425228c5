"""Run directories for the tests of ``hookbus eval`` and ``hookbus report``: a seeded model
saved as a run's one checkpoint beside its ``config.yaml``, without training, in a second.

    write_run(tmp_path / "run", DIGITS_CNN)

The settings are tiny: a small CNN of width 4 (16 features) or hookbus's ``vit_tiny``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hookbus.config import validate_config
from hookbus.engine.checkpoint.checkpoint_io import (
    FORMAT,
    checkpoint_name,
    point_to_newest,
    save_atomic,
)
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.parts.models import build_model

TINY = {
    "data": {"name": "tiny_test_images", "image_size": 8},
    "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
}
"""hookbus.testing's 24 train and 8 test images of 4 classes, a small CNN of width 4."""

DIGITS_CNN = {
    "data": {"name": "digits", "image_size": 16},
    "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
}
"""The digits (1297 train and 500 test images of 16 px), a small CNN of width 4."""


SYNTHETIC = {
    "data": {
        "name": "synthetic",
        "image_size": 8,
        "synthetic": {"train_size": 300, "test_size": 101, "channels": 1, "num_classes": 5},
    },
    "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
}
"""hookbus's generated stripe images (300 train, 101 test, 5 classes, 8 px), a small CNN
of width 4: a data set every process finds by name, without scikit-learn."""


def photo_settings(folder: Path, size: int = 32) -> dict[str, Any]:
    """A run on the image folder ``folder`` (``train/``, ``test/``) at ``size`` px, RGB,
    read without loader workers."""
    return {
        "data": {
            "name": "image_folder",
            "pipeline": "crop_first",
            "image_size": size,
            "num_workers": 0,
            "folder": {
                "train_dir": str(folder / "train"),
                "test_dir": str(folder / "test"),
                "labels": "class_folders",
            },
        },
        "model": {"backbone": {"width": 4, "in_channels": 3}, "head": {"dims": [16, 16, 8]}},
    }


def write_run(run_dir: Path, settings: dict[str, Any], *, seed: int = 0, batches: int = 3) -> Path:
    """A run directory at ``run_dir`` whose newest checkpoint holds the model of
    ``settings`` drawn with ``seed``, as training writes it (checksum file, link,
    ``config.yaml``); returns the checkpoint's path. A second call with another
    ``batches`` adds a newer checkpoint."""
    cfg = validate_config({**settings, "checkpoint": {"dir": str(run_dir)}}, "test run")
    torch.manual_seed(seed)
    model = build_model(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(config_to_yaml(cfg))
    path = run_dir / checkpoint_name(0, batches)
    checkpoint = {"format": FORMAT, "phase_idx": 0, "train_phase_idx": 0, "iteration": batches}
    checkpoint |= {"iteration_num": batches, "optimizer": {}, "hooks": {}}
    state = {"model": model.state_dict(), "config": cfg.model_dump(mode="json")}
    save_atomic(checkpoint | state, path)
    point_to_newest(run_dir, path.name)
    return path

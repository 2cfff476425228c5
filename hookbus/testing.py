"""What a test of your own hook or train step needs, without a checkout of hookbus.

:class:`FakeEngine` runs a hook's handlers without a model, data or loop;
:func:`tiny_config` is a config that trains for real in about a second, on
:data:`TINY_DATA`, a data set of 24 train and 8 test images of 8x8 that importing this
module registers::

    from hookbus import SSLTrainer
    from hookbus.testing import FakeEngine, tiny_config


    def test_my_hook_counts_steps():
        engine = FakeEngine(train=True)
        hook = MyHook().attach(engine)
        engine.step()
        assert hook.steps == 1


    def test_a_run_with_my_hook(tmp_path):
        cfg = tiny_config(tmp_path / "run", hooks={"extra": [{"name": "my_hook"}]})
        state = SSLTrainer(cfg).train()
        assert state.iteration == 6  # 2 epochs of 3 steps

A run in another process (a subprocess, ``torchrun``) finds the data set by name when
its recipe imports this module: ``trainer.imports: [hookbus.testing]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hookbus.config import Config, validate_config
from hookbus.engine.bus.testing import FakeEngine
from hookbus.parts.data import DATASETS, TensorImageDataset

__all__ = ["TINY_DATA", "FakeEngine", "tiny_config", "tiny_images"]

TINY_DATA = "tiny_test_images"
"""The registered name of the tiny data set (``data.name``)."""


def tiny_images(count: int, seed: int) -> TensorImageDataset:
    """``count`` grey 8x8 images of 4 classes (label ``i % 4``), the same for a seed.

    Each image is faint noise plus its label as brightness: the classes differ.
    """
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % 4
    images = torch.randn(count, 1, 8, 8, generator=generator) * 0.1
    images[:, 0, :, :] += labels.view(-1, 1, 1).float()
    return TensorImageDataset(images, labels)


if TINY_DATA not in DATASETS:

    @DATASETS.register(TINY_DATA)
    def _build_tiny_data(cfg: object) -> tuple[TensorImageDataset, TensorImageDataset]:
        """24 train and 8 test images of 4 classes, 8x8, made from a fixed seed."""
        return tiny_images(24, 0), tiny_images(8, 1)


def tiny_config(run_dir: str | Path, **sections: dict[str, Any]) -> Config:
    """A validated config that trains in about a second, its run directory at ``run_dir``.

    SimCLR on :data:`TINY_DATA`: a small CNN of width 4, batches of 8 (3 train steps and
    1 test step an epoch), 2 epochs without warm-up, a kNN meter with k=3, a log line
    every step, no progress bar. Each keyword is a config section whose keys replace
    those of the tiny config, e.g. ``tiny_config(path, optimizer={"num_epochs": 1})``.
    """
    raw: dict[str, dict[str, Any]] = {
        "trainer": {"log_frequency": 1},
        "data": {"name": TINY_DATA, "image_size": 8, "batch_size": 8, "test_batch_size": 8},
        "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
        "optimizer": {"num_epochs": 2, "warmup_epochs": 0},
        "meters": {"knn": {"k": 3}},
        "checkpoint": {"dir": str(run_dir)},
        "hooks": {"progress_bar": {"enabled": False}},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return validate_config(raw, "tiny test config")

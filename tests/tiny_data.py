"""A tiny registered data set for tests; recipes load it with trainer.imports=[tests.tiny_data]."""

from __future__ import annotations

from pathlib import Path

import torch

from hookbus import DATASETS, Config, RunState, SSLTrainer, load_config
from hookbus.parts.data import TensorImageDataset

TINY = "tiny_test_images"
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TINY_RECIPE = (
    f"data.name={TINY}",
    "data.image_size=8",
    "data.batch_size=8",
    "data.test_batch_size=8",
    "meters.knn.k=3",
    "optimizer.num_epochs=1",
    "optimizer.warmup_epochs=0",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
)
"""Overrides that shrink a shipped recipe to one epoch of the tiny data set: 3 train
steps of 8 images of 8x8, a kNN with k=3, no evaluation report."""


def tiny_recipe(recipe: str, run_dir: Path, *overrides: str) -> Config:
    """The shipped ``configs/<recipe>.yaml`` on the tiny data set, with ``overrides``
    (model sizes to fit 8x8 images) and its run directory at ``run_dir``."""
    return load_config(
        CONFIGS / f"{recipe}.yaml", [*TINY_RECIPE, *overrides, f"checkpoint.dir={run_dir}"]
    )


def train_tiny(cfg: Config) -> RunState:
    """Train ``cfg`` (from :func:`tiny_recipe`): asserts the 3 steps and a finite loss."""
    state = SSLTrainer(cfg).train()
    assert state.iteration == 3
    assert state.loss is not None and bool(state.loss.isfinite())
    return state


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

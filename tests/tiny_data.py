"""A tiny registered data set for tests; recipes load it with trainer.imports=[tests.tiny_data]."""

from __future__ import annotations

from pathlib import Path

from hookbus import Config, RunState, SSLTrainer, load_config
from hookbus.testing import TINY_DATA as TINY

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


def tiny_folder_run(data: dict) -> dict:
    """The settings of a one-epoch run of a small CNN (width 4, head [16, 8]) on the image
    folder ``data`` (the ``data`` section: ``image_folder`` with its folders), without
    the kNN meter, the evaluation report, the progress bar, TensorBoard or the plot: the
    run the image-folder tests start on small folders of photographs."""
    quiet = ("progress_bar", "evaluation_report", "tensorboard", "summary_plot")
    return {
        "data": data,
        "model": {"backbone": {"width": 4, "in_channels": 3}, "head": {"dims": [16, 8]}},
        "optimizer": {"num_epochs": 1, "warmup_epochs": 0},
        "meters": {"knn": {"enabled": False}},
        "hooks": {hook: {"enabled": False} for hook in quiet},
    }

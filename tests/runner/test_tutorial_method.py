"""The SSL method of the "Add an SSL method" tutorial (examples/align_uniform.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.examples.align_uniform import AlignUniformLoss
from hookbus.testing import tiny_config


def test_identical_views_have_zero_alignment() -> None:
    view = torch.eye(3)
    loss = AlignUniformLoss(weight=0.0)({"embeddings": [view, view.clone()]}, {})
    assert loss.item() == 0.0


def test_uniformity_of_orthogonal_points_is_minus_t_times_two() -> None:
    view = torch.eye(3)  # every pair at squared distance 2
    loss = AlignUniformLoss(t=2.0)({"embeddings": [view, view.clone()]}, {})
    assert loss.item() == pytest.approx(math.log(math.exp(-4.0)))


def test_gradients_reach_the_embeddings() -> None:
    first = torch.randn(8, 4, requires_grad=True)
    AlignUniformLoss()({"embeddings": [first, torch.randn(8, 4)]}, {}).backward()
    assert first.grad is not None and torch.isfinite(first.grad).all()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="t > 0"):
        AlignUniformLoss(t=0)


def test_a_recipe_trains_with_it_by_name(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        trainer={"imports": ["hookbus.examples.align_uniform"]},
        loss={"name": "align_uniform"},
    )
    state = SSLTrainer(cfg).train()
    assert state.iteration == 6
    assert math.isfinite(float(state.loss))

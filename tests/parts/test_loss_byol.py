"""The BYOL loss against a direct loop-based reference."""

from __future__ import annotations

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import ByolLoss, build_loss
from tests.loss_reference import assert_same_value_and_gradients, tensors, unit


def reference(predictions: list, targets: list) -> torch.Tensor:
    """Mean over ordered view pairs and samples of ||unit(p_a) - unit(t_b)||^2."""
    terms = []
    for a, prediction_view in enumerate(predictions):
        for b, target_view in enumerate(targets):
            if a != b:
                for i in range(len(prediction_view)):
                    difference = unit(prediction_view[i]) - unit(target_view[i])
                    terms.append(sum(value * value for value in difference))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("views", [2, 3])
def test_matches_the_reference_in_value_and_gradient(views: int) -> None:
    predictions, targets = tensors(views), tensors(views, seed=1)
    ours = ByolLoss()({"predictions": predictions, "teacher_embeddings": targets}, {})
    assert_same_value_and_gradients(ours, reference(predictions, targets), predictions)


def test_equal_directions_give_zero_and_opposite_ones_four() -> None:
    p = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    same = ByolLoss()({"predictions": [p, p], "teacher_embeddings": [3 * p, 2 * p]}, {})
    opposite = ByolLoss()({"predictions": [p, p], "teacher_embeddings": [-p, -p]}, {})
    assert float(same) == pytest.approx(0.0, abs=1e-6)
    assert float(opposite) == pytest.approx(4.0)


def test_no_gradient_reaches_the_targets() -> None:
    predictions, targets = tensors(2), tensors(2, seed=1)
    loss = ByolLoss()({"predictions": predictions, "teacher_embeddings": targets}, {})
    assert torch.autograd.grad(loss, targets, allow_unused=True) == (None, None)


def test_built_by_name() -> None:
    cfg = validate_config(
        {"loss": {"name": "byol"}, "model": {"predictor": {"dims": [64, 32, 64]}}}
    )
    assert isinstance(build_loss(cfg), ByolLoss)

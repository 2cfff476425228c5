"""The SimSiam loss against the paper's equations, written out element by element.

``L = D(p1, stopgrad(z2)) / 2 + D(p2, stopgrad(z1)) / 2``,
``D(p, z) = -mean_i (p_i / ||p_i||) . (z_i / ||z_i||)``
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import SimsiamLoss, build_loss
from tests.loss_reference import assert_same_value_and_gradients, tensors, unit
from tests.tiny_data import tiny_recipe, train_tiny

ROOT = Path(__file__).resolve().parents[2]


def negative_cosine(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """D(p, z): minus the mean over samples of the cosine, from scalar terms."""
    terms = []
    for i in range(len(predictions)):
        p, z = unit(predictions[i]), unit(targets[i].detach())
        terms.append(-sum(a * b for a, b in zip(p, z, strict=True)))
    return sum(terms) / len(terms)


def test_two_views_match_the_paper() -> None:
    p1, p2 = tensors(2)
    z1, z2 = tensors(2, seed=1)
    ours = SimsiamLoss()({"predictions": [p1, p2], "embeddings": [z1, z2]}, {})
    expected = negative_cosine(p1, z2) / 2 + negative_cosine(p2, z1) / 2
    assert_same_value_and_gradients(ours, expected, [p1, p2, z1, z2])


def test_three_views_average_the_ordered_pairs() -> None:
    predictions, embeddings = tensors(3), tensors(3, seed=1)
    ours = SimsiamLoss()({"predictions": predictions, "embeddings": embeddings}, {})
    pairs = [(a, b) for a in range(3) for b in range(3) if a != b]
    expected = sum(negative_cosine(predictions[a], embeddings[b]) for a, b in pairs) / 6
    assert_same_value_and_gradients(ours, expected, predictions)


def test_no_gradient_flows_through_the_stop_gradient_branch() -> None:
    predictions, embeddings = tensors(2), tensors(2, seed=1)
    loss = SimsiamLoss()({"predictions": predictions, "embeddings": embeddings}, {})
    assert torch.autograd.grad(loss, embeddings, allow_unused=True) == (None, None)
    # Through the predictor, z still gets gradient: p = z @ W feeds the loss.
    weight = torch.eye(5, dtype=torch.float64) + 0.1
    predictions = [z @ weight for z in embeddings]
    loss = SimsiamLoss()({"predictions": predictions, "embeddings": embeddings}, {})
    grads = torch.autograd.grad(loss, embeddings)
    detached = [z.detach().requires_grad_() for z in embeddings]
    only_predictor = SimsiamLoss()(
        {"predictions": [z @ weight for z in detached], "embeddings": embeddings}, {}
    )
    for got, want in zip(grads, torch.autograd.grad(only_predictor, detached), strict=True):
        torch.testing.assert_close(got, want)


def test_gradcheck_in_float64() -> None:
    p1, p2 = tensors(2, rows=4, cols=3, seed=2)
    z1, z2 = (t.detach() for t in tensors(2, rows=4, cols=3, seed=5))
    loss = SimsiamLoss()
    assert torch.autograd.gradcheck(
        lambda a, b: loss({"predictions": [a, b], "embeddings": [z1, z2]}, {}), (p1, p2)
    )


def test_aligned_predictions_give_minus_one() -> None:
    z = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    loss = SimsiamLoss()({"predictions": [3 * z, 2 * z], "embeddings": [z, z]}, {})
    assert float(loss) == pytest.approx(-1.0)


def test_needs_a_predictor() -> None:
    with pytest.raises(ValueError, match="simsiam needs a predictor"):
        validate_config({"loss": {"name": "simsiam"}})
    with pytest.raises(KeyError, match="predictions"):
        SimsiamLoss()({"embeddings": tensors(2)}, {})


def test_built_by_name() -> None:
    cfg = validate_config(
        {"loss": {"name": "simsiam"}, "model": {"predictor": {"dims": [64, 16, 64]}}}
    )
    assert isinstance(build_loss(cfg), SimsiamLoss)


@pytest.mark.slow
def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "simsiam_digits",
        tmp_path / "run",
        "model.backbone.width=4",
        "model.head.dims=[16, 32, 16]",
        "model.predictor.dims=[16,8,16]",
    )
    assert cfg.loss.name == "simsiam"
    train_tiny(cfg)

"""The Barlow Twins loss against a direct loop-based reference, and on two gloo ranks."""

from __future__ import annotations

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import BarlowTwinsLoss, build_loss
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    on_two_ranks,
    tensors,
    two_rank_results,
)


def standardised_column(view: torch.Tensor, column: int, eps: float) -> list[torch.Tensor]:
    values = [view[i, column] for i in range(len(view))]
    mean = sum(values) / len(values)
    variance = sum((value - mean) ** 2 for value in values) / len(values)
    return [(value - mean) / torch.sqrt(variance + eps) for value in values]


def reference_pair(first: torch.Tensor, second: torch.Tensor, lambd: float, eps: float):
    dims = first.shape[1]
    a = [standardised_column(first, j, eps) for j in range(dims)]
    b = [standardised_column(second, j, eps) for j in range(dims)]
    total = first.new_zeros(())
    for i in range(dims):
        for j in range(dims):
            correlation = sum(x * y for x, y in zip(a[i], b[j], strict=True)) / len(first)
            total = total + ((1 - correlation) ** 2 if i == j else lambd * correlation**2)
    return total


@pytest.mark.parametrize("lambd", [0.005, 0.5])
def test_two_views_match_the_reference(lambd: float) -> None:
    views = tensors(2, rows=7, cols=4)
    ours = BarlowTwinsLoss(lambd)({"embeddings": views}, {})
    expected = reference_pair(views[0], views[1], lambd, 1e-5)
    assert_same_value_and_gradients(ours, expected, views)


def test_three_views_average_the_pairs() -> None:
    views = tensors(3, rows=5, cols=3)
    ours = BarlowTwinsLoss(0.1)({"embeddings": views}, {})
    pairs = [(0, 1), (0, 2), (1, 2)]
    expected = sum(reference_pair(views[a], views[b], 0.1, 1e-5) for a, b in pairs) / 3
    assert_same_value_and_gradients(ours, expected, views)


def test_identical_decorrelated_views_give_almost_zero() -> None:
    # Columns of a 4x2 matrix with zero mean, unit variance and zero correlation.
    view = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    loss = BarlowTwinsLoss(0.5)({"embeddings": [view, view]}, {})
    assert float(loss) == pytest.approx(0.0, abs=1e-4)


def test_built_from_the_section() -> None:
    cfg = validate_config({"loss": {"name": "barlow_twins", "barlow_twins": {"lambd": 0.01}}})
    loss = build_loss(cfg)
    assert isinstance(loss, BarlowTwinsLoss)
    assert loss.lambd == 0.01


def global_embeddings() -> dict[str, list[torch.Tensor]]:
    """Two views of a global batch of 8 embeddings of 6, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    return {"embeddings": [torch.randn(8, 6, generator=generator) for _ in range(2)]}


def registered_loss(output: dict[str, list[torch.Tensor]]) -> torch.Tensor:
    """The loss ``loss.name: barlow_twins`` builds with its default settings."""
    return build_loss(validate_config({"loss": {"name": "barlow_twins"}}))(output, {})


# Each rank standardises its columns and sums its cross-correlation over the global batch.
SHARDED = ShardedLoss(registered_loss, global_embeddings, ("embeddings",))


@on_two_ranks
def barlow_twins_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_reduce_the_cross_correlation_over_the_global_batch() -> None:
    SHARDED.assert_ranks_match_one_process(two_rank_results(barlow_twins_on_each_rank))

"""The VICReg loss against the authors' released training code's form of the paper's
terms, each term written out element by element:

    ``loss = lambda * s(Z, Z') + mu * (v(Z) + v(Z')) / 2 + nu * (c(Z) + c(Z'))``

(the code averages the two branches' variance terms, where the paper's equation 6 sums
them; the published weights 25 / 25 / 1 were tuned with the code).

On two gloo ranks, each holding its shard of a fixed global batch, the loss and gradients
are those of one process on the whole batch.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import VicregLoss, build_loss
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    on_two_ranks,
    tensors,
    two_rank_results,
)
from tests.tiny_data import tiny_recipe, train_tiny

ROOT = Path(__file__).resolve().parents[2]
GLOBAL_BATCH, DIM = 8, 5


def invariance(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """s(Z, Z') = 1/(n d) sum_i sum_j (z_ij - z'_ij)^2."""
    rows, dims = first.shape
    terms = [(first[i, j] - second[i, j]) ** 2 for i in range(rows) for j in range(dims)]
    return sum(terms) / (rows * dims)


def column_mean(view: torch.Tensor, j: int) -> torch.Tensor:
    return sum(view[i, j] for i in range(len(view))) / len(view)


def variance(view: torch.Tensor, gamma: float = 1.0, eps: float = 1e-4) -> torch.Tensor:
    """v(Z) = 1/d sum_j max(0, gamma - sqrt(Var(z_j) + eps)), Var unbiased."""
    rows, dims = view.shape
    total = view.new_zeros(())
    for j in range(dims):
        mean = column_mean(view, j)
        var = sum((view[i, j] - mean) ** 2 for i in range(rows)) / (rows - 1)
        total = total + torch.clamp(gamma - torch.sqrt(var + eps), min=0)
    return total / dims


def covariance(view: torch.Tensor) -> torch.Tensor:
    """c(Z) = 1/d sum_{j != k} C(Z)_jk^2, C(Z) = 1/(n-1) sum_i (z_i - mean)(z_i - mean)^T."""
    rows, dims = view.shape
    means = [column_mean(view, j) for j in range(dims)]
    total = view.new_zeros(())
    for j in range(dims):
        for k in range(dims):
            if j != k:
                entry = sum(
                    (view[i, j] - means[j]) * (view[i, k] - means[k]) for i in range(rows)
                ) / (rows - 1)
                total = total + entry**2
    return total / dims


def reference(first, second, sim=25.0, std=25.0, cov=1.0) -> torch.Tensor:
    """The authors' code: the branches' variance terms averaged, covariance terms summed."""
    return (
        sim * invariance(first, second)
        + std * (variance(first) + variance(second)) / 2
        + cov * (covariance(first) + covariance(second))
    )


def paper_equation_6(first, second, sim=25.0, std=25.0, cov=1.0) -> torch.Tensor:
    """The paper's equation 6: both branches' variance terms summed."""
    return (
        sim * invariance(first, second)
        + std * (variance(first) + variance(second))
        + cov * (covariance(first) + covariance(second))
    )


def scaled_views() -> list[torch.Tensor]:
    # Scaled down so that some dimensions have std < 1 (hinge active) and some not.
    first, second = tensors(2, rows=7, cols=4)
    return [(first * 0.6).detach().requires_grad_(), (second * 1.3).detach().requires_grad_()]


@pytest.mark.parametrize("coefficients", [(25.0, 25.0, 1.0), (1.0, 3.0, 0.5), (0.0, 1.0, 0.0)])
def test_two_views_match_the_authors_code(coefficients: tuple[float, float, float]) -> None:
    leaves = scaled_views()
    ours = VicregLoss(*coefficients)({"embeddings": leaves}, {})
    expected = reference(*leaves, *coefficients)
    assert_same_value_and_gradients(ours, expected, leaves)


@pytest.mark.parametrize("std_coeff", [50.0, 6.0])
def test_twice_the_std_coeff_gives_the_papers_equation(std_coeff: float) -> None:
    leaves = scaled_views()
    assert all(float(variance(leaf.detach())) > 0 for leaf in leaves)
    ours = VicregLoss(25.0, std_coeff, 1.0)({"embeddings": leaves}, {})
    expected = paper_equation_6(*leaves, 25.0, std_coeff / 2, 1.0)
    assert_same_value_and_gradients(ours, expected, leaves)
    assert float(ours.detach()) != pytest.approx(
        float(paper_equation_6(*leaves, 25.0, std_coeff, 1.0).detach())
    )


def test_the_hinge_is_active_on_some_dimensions_and_not_others() -> None:
    view = torch.tensor([[0.1, 3.0], [-0.1, -3.0], [0.0, 1.0]], dtype=torch.float64)
    # Column 0: std 0.1 (hinge 0.9); column 1: std > 1 (hinge 0).
    assert float(variance(view)) == pytest.approx((1 - (0.01 + 1e-4) ** 0.5) / 2)
    loss = VicregLoss(0.0, 1.0, 0.0)({"embeddings": [view, view]}, {})
    assert float(loss) == pytest.approx(float(variance(view)))


def test_three_views_average_the_pairs() -> None:
    views = tensors(3, rows=5, cols=3)
    ours = VicregLoss()({"embeddings": views}, {})
    pairs = list(combinations(range(3), 2))
    expected = sum(reference(views[a], views[b]) for a, b in pairs) / len(pairs)
    assert_same_value_and_gradients(ours, expected, views)


def test_gradcheck_in_float64() -> None:
    first, second = tensors(2, rows=6, cols=3, seed=3)
    loss = VicregLoss(2.0, 3.0, 0.7)
    assert torch.autograd.gradcheck(
        lambda a, b: loss({"embeddings": [a, b]}, {}), (first * 0.5, second * 0.5)
    )


def test_identical_whitened_views_give_zero() -> None:
    # Zero-mean columns with unbiased variance 4/3 (std > 1) and zero covariance.
    view = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    loss = VicregLoss()({"embeddings": [view, view]}, {})
    assert float(loss) == pytest.approx(0.0, abs=1e-6)


def test_one_view_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 2 views"):
        VicregLoss()({"embeddings": tensors(1)}, {})


def test_built_from_the_section() -> None:
    cfg = validate_config({"loss": {"name": "vicreg", "vicreg": {"sim_coeff": 10.0}}})
    loss = build_loss(cfg)
    assert isinstance(loss, VicregLoss)
    assert (loss.sim_coeff, loss.std_coeff, loss.cov_coeff) == (10.0, 25.0, 1.0)


def test_negative_coefficients_are_rejected() -> None:
    with pytest.raises(ValueError, match="cov_coeff"):
        validate_config({"loss": {"name": "vicreg", "vicreg": {"cov_coeff": -1}}})


def global_views() -> dict[str, list[torch.Tensor]]:
    """The embeddings of the global batch, per view, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    views = [torch.randn(GLOBAL_BATCH, DIM, generator=generator) * 0.7 for _ in range(2)]
    return {"embeddings": views}


# Variance and covariance see the gathered batch on both ranks; the invariance of the
# global batch is the mean of the shards'.
SHARDED = ShardedLoss(lambda out: VicregLoss()(out, {}), global_views, ("embeddings",))


@on_two_ranks
def vicreg_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process_on_the_whole_batch() -> None:
    ranks = two_rank_results(vicreg_on_each_rank)
    SHARDED.assert_ranks_match_one_process(ranks, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "vicreg_digits",
        tmp_path / "run",
        "model.backbone.width=4",
        "model.head.dims=[16, 32, 32, 32]",
    )
    assert cfg.loss.name == "vicreg"
    train_tiny(cfg)

"""The LeJEPA loss against the authors' arithmetic, written out term by term in float64:

    ``loss = lambda * SIGReg + (1 - lambda) * prediction``

SIGReg: for each view and each random unit direction, the Epps-Pulley statistic of the
projected rows, ``N * integral over [-t_max, t_max] of |ecf(t) - exp(-t^2/2)|^2
exp(-t^2/2) dt`` by the trapezoidal rule on the full symmetric grid (the authors'
code integrates on ``[0, t_max]`` with doubled weights: the same number), averaged over
views and directions; prediction: the mean squared difference between every view and
the mean of the global views.

On two gloo ranks, each holding its shard of a fixed global batch, the loss and gradients
are those of one process on the whole batch (the all-reduced sums carry their gradient).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import LejepaLoss, build_loss
from hookbus.parts.losses.lejepa import directions, sigreg
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    on_two_ranks,
    tensors,
    two_rank_results,
)
from tests.tiny_data import tiny_recipe, train_tiny

KNOTS, T_MAX, SLICES = 5, 3.0, 4


def epps_pulley(values: list[torch.Tensor], knots: int, t_max: float) -> torch.Tensor:
    """``N * sum_t w_t * ((mean cos(t x) - phi(t))^2 + (mean sin(t x))^2) * phi(t)`` on the
    symmetric grid ``-t_max .. t_max`` of ``2 knots - 1`` points, trapezoidal weights."""
    count = len(values)
    step = t_max / (knots - 1)
    grid = [-t_max + index * step for index in range(2 * knots - 1)]
    total = torch.zeros((), dtype=torch.float64)
    for index, t in enumerate(grid):
        weight = step / 2 if index in (0, len(grid) - 1) else step
        phi = math.exp(-t * t / 2)
        ecf_cos = sum(torch.cos(t * x) for x in values) / count
        ecf_sin = sum(torch.sin(t * x) for x in values) / count
        total = total + weight * ((ecf_cos - phi) ** 2 + ecf_sin**2) * phi
    return count * total


def reference_sigreg(views: list[torch.Tensor], unit: torch.Tensor) -> torch.Tensor:
    """The statistic of every (view, direction), averaged."""
    statistics = []
    for view in views:
        for slice_index in range(unit.shape[1]):
            direction = unit[:, slice_index]
            values = [sum(row[j] * direction[j] for j in range(len(row))) for row in view]
            statistics.append(epps_pulley(values, KNOTS, T_MAX))
    return sum(statistics) / len(statistics)


def reference_prediction(views: list[torch.Tensor], global_views: int) -> torch.Tensor:
    """``1 / (V N D) sum_v sum_i sum_j (mean_g z_gij - z_vij)^2``."""
    rows, dims = views[0].shape
    terms = []
    for view in views:
        for i in range(rows):
            for j in range(dims):
                center = sum(views[g][i, j] for g in range(global_views)) / global_views
                terms.append((center - view[i, j]) ** 2)
    return sum(terms) / len(terms)


def test_directions_are_unit_columns_of_a_seeded_normal_draw() -> None:
    unit = directions(5, 7, seed=3)
    draw = torch.randn(5, 7, generator=torch.Generator().manual_seed(3))
    assert unit.shape == (5, 7) and unit.dtype == torch.float32
    torch.testing.assert_close(unit.norm(dim=0), torch.ones(7))
    torch.testing.assert_close(unit, draw / draw.norm(dim=0), rtol=0, atol=0)


def test_sigreg_equals_the_epps_pulley_statistic_written_out() -> None:
    views = tensors(3, rows=6, cols=5, seed=1)
    unit = directions(5, SLICES, seed=0).double()
    ours = sigreg(torch.stack(views), unit, KNOTS, T_MAX)
    assert_same_value_and_gradients(ours, reference_sigreg(views, unit), views, tol=1e-12)


@pytest.mark.parametrize("weight", [0.05, 0.5])
def test_the_loss_equals_the_authors_arithmetic_written_out(weight: float) -> None:
    views = tensors(3, rows=6, cols=5, seed=2)
    loss = LejepaLoss(weight, global_views=2, slices=SLICES, knots=KNOTS, t_max=T_MAX)
    torch.manual_seed(11)
    ours = loss({"embeddings": views}, {})
    torch.manual_seed(11)
    unit = directions(5, SLICES, int(torch.randint(0, 2**62, (1,)))).double()
    reference = weight * reference_sigreg(views, unit) + (1 - weight) * reference_prediction(
        views, 2
    )
    assert_same_value_and_gradients(ours, reference, views, tol=1e-12)


def test_sigreg_is_small_for_gaussian_rows_and_large_for_collapsed_ones() -> None:
    generator = torch.Generator().manual_seed(0)
    gaussian = torch.randn(1, 2000, 8, generator=generator, dtype=torch.float64)
    unit = directions(8, 64, seed=1).double()
    collapsed = torch.zeros_like(gaussian) + 0.01 * gaussian
    assert float(sigreg(gaussian, unit, 17, 3.0)) < 3.0  # about 1 per direction
    assert float(sigreg(collapsed, unit, 17, 3.0)) > 100.0


def test_each_call_draws_new_directions_from_the_global_generator() -> None:
    views = tensors(2, rows=6, cols=5, seed=3)
    loss = LejepaLoss(1.0, slices=3, knots=KNOTS)
    torch.manual_seed(0)
    first = loss({"embeddings": views}, {}).detach()
    second = loss({"embeddings": views}, {}).detach()
    torch.manual_seed(0)
    assert float(first) != float(second)
    assert float(loss({"embeddings": views}, {}).detach()) == float(first)


def test_the_config_builds_the_loss_with_its_settings() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "lejepa", "lejepa": {"sigreg_weight": 0.1, "slices": 64}},
            "model": {"head": {"dims": ["backbone", 32, 16]}},
        }
    )
    loss = build_loss(cfg)
    assert isinstance(loss, LejepaLoss)
    assert (loss.sigreg_weight, loss.slices, loss.knots, loss.t_max) == (0.1, 64, 17, 3.0)


def test_more_global_views_than_large_views_are_refused() -> None:
    with pytest.raises(Exception, match="loss.lejepa.global_views is 3"):
        validate_config({"loss": {"name": "lejepa", "lejepa": {"global_views": 3}}})


def test_its_settings_are_refused_under_another_method() -> None:
    with pytest.raises(Exception, match="loss.lejepa.slices is read by loss.name lejepa"):
        validate_config({"loss": {"name": "vicreg", "lejepa": {"slices": 8}}})


def global_batch() -> dict[str, list[torch.Tensor]]:
    """The projections of the global batch, per view, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    return {"embeddings": [torch.randn(8, 5, generator=generator) for _ in range(3)]}


def loss_at_a_fixed_seed(output: dict[str, list[torch.Tensor]]) -> torch.Tensor:
    """The loss with the global generator at seed 5, as every rank has it."""
    torch.manual_seed(5)
    return LejepaLoss(0.5, slices=16)(output, {})


SHARDED = ShardedLoss(loss_at_a_fixed_seed, global_batch, ("embeddings",))


@on_two_ranks
def lejepa_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process_on_the_whole_batch() -> None:
    ranks = two_rank_results(lejepa_on_each_rank)
    SHARDED.assert_ranks_match_one_process(ranks, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "lejepa_digits_vit_tiny",
        tmp_path / "run",
        "data.small_views.size=4",
        "loss.lejepa.slices=32",
    )
    assert cfg.loss.name == "lejepa"
    train_tiny(cfg)

"""Sinkhorn-Knopp's sums and the SwAV loss against a direct loop-based reference."""

from __future__ import annotations

import math

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import SwavLoss, build_loss, sinkhorn
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    log_softmax_entry,
    on_two_ranks,
    tensors,
    two_rank_results,
)


def scores(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(rows, cols, generator=generator, dtype=torch.float64) * 2 - 1


def reference_sinkhorn(values: torch.Tensor, epsilon: float, iterations: int) -> torch.Tensor:
    """Sinkhorn-Knopp written with explicit sums over Python lists."""
    rows, cols = values.shape
    q = [[math.exp(float(values[i, k]) / epsilon) for k in range(cols)] for i in range(rows)]
    total = sum(map(sum, q))
    q = [[x / total for x in row] for row in q]
    for _ in range(iterations):
        column_sums = [sum(q[i][k] for i in range(rows)) for k in range(cols)]
        q = [[q[i][k] / column_sums[k] / cols for k in range(cols)] for i in range(rows)]
        q = [[x / sum(row) / rows for x in row] for row in q]
    return torch.tensor([[x * rows for x in row] for row in q], dtype=torch.float64)


def test_sinkhorn_rows_sum_to_one_and_columns_to_batch_over_prototypes() -> None:
    codes = sinkhorn(scores(12, 4), epsilon=0.5, iterations=200)
    torch.testing.assert_close(codes.sum(dim=1), torch.ones(12, dtype=torch.float64))
    torch.testing.assert_close(codes.sum(dim=0), torch.full((4,), 3.0, dtype=torch.float64))


def test_sinkhorn_rows_are_exact_and_columns_even_out_with_iterations() -> None:
    values = scores(32, 8)
    share = torch.full((8,), 4.0, dtype=torch.float64)
    deviations = []
    for iterations in (1, 3, 10):
        codes = sinkhorn(values, epsilon=0.05, iterations=iterations)
        torch.testing.assert_close(codes.sum(dim=1), torch.ones(32, dtype=torch.float64))
        assert (codes >= 0).all()
        deviations.append(float((codes.sum(dim=0) - share).abs().max()))
    assert deviations == sorted(deviations, reverse=True)
    assert deviations[-1] < 0.5


def test_sinkhorn_matches_the_reference() -> None:
    values = scores(6, 3, seed=2)
    torch.testing.assert_close(sinkhorn(values, 0.3, 3), reference_sinkhorn(values, 0.3, 3))


def test_sinkhorn_runs_in_float32_for_half_inputs() -> None:
    codes = sinkhorn(scores(8, 4).to(torch.bfloat16), 0.05, 3)
    assert codes.dtype == torch.float32
    assert torch.isfinite(codes).all()


def reference_loss(views, temperature, epsilon, iterations, assign, queued=None) -> torch.Tensor:
    total = 0
    for i in range(assign):
        batch = views[i].detach()
        joint = batch if queued is None else torch.cat([queued[i], batch])
        codes = reference_sinkhorn(joint, epsilon, iterations)[-len(batch) :]
        others = []
        for v, view in enumerate(views):
            if v == i:
                continue
            terms = []
            for n in range(len(view)):
                logits = [view[n, k] / temperature for k in range(view.shape[1])]
                terms.append(
                    -sum(codes[n, k] * log_softmax_entry(logits, k) for k in range(len(logits)))
                )
            others.append(sum(terms) / len(terms))
        total = total + sum(others) / len(others)
    return total / assign


@pytest.mark.parametrize(("views", "assign"), [(2, 2), (4, 2), (3, 1)])
def test_swav_matches_the_reference(views: int, assign: int) -> None:
    inputs = tensors(views, rows=5, cols=4)
    ours = SwavLoss(0.1, 0.05, 3, assign)({"scores": inputs}, {})
    expected = reference_loss(inputs, 0.1, 0.05, 3, assign)
    assert_same_value_and_gradients(ours, expected, inputs)


def test_swav_multi_crop_views_of_other_batch_shapes_are_predicted_too() -> None:
    large = tensors(2, rows=5, cols=4)
    small = tensors(2, rows=5, cols=4, seed=3)
    ours = SwavLoss(0.2, 0.1, 3, 2)({"scores": large + small}, {})
    expected = reference_loss(large + small, 0.2, 0.1, 3, 2)
    assert_same_value_and_gradients(ours, expected, large + small)


def test_swav_with_queue_solves_sinkhorn_with_the_queued_rows() -> None:
    inputs = tensors(2, rows=4, cols=3)
    queued = [scores(6, 3, seed=5), scores(6, 3, seed=6)]
    ours = SwavLoss(0.1, 0.05, 3, 2)({"scores": inputs, "queue_scores": queued}, {})
    expected = reference_loss(inputs, 0.1, 0.05, 3, 2, queued)
    assert_same_value_and_gradients(ours, expected, inputs)
    without_queue = SwavLoss(0.1, 0.05, 3, 2)({"scores": inputs}, {})
    assert float(ours.detach()) != pytest.approx(float(without_queue.detach()))


def test_swav_built_from_its_section() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "swav", "swav": {"temperature": 0.2, "assign_views": 1}},
            "model": {"prototypes": {"count": 10}},
        }
    )
    loss = build_loss(cfg)
    assert isinstance(loss, SwavLoss)
    assert (loss.temperature, loss.assign_views) == (0.2, 1)


def global_scores() -> dict[str, list[torch.Tensor]]:
    """The prototype scores of two views of a global batch of 8 (6 prototypes), the same
    on every rank."""
    generator = torch.Generator().manual_seed(0)
    return {"scores": [torch.randn(8, 6, generator=generator) for _ in range(2)]}


def registered_loss(output: dict[str, list[torch.Tensor]]) -> torch.Tensor:
    """The loss ``loss.name: swav`` builds with its default settings."""
    raw = {"loss": {"name": "swav"}, "model": {"prototypes": {"count": 6}}}
    return build_loss(validate_config(raw))(output, {})


# Sinkhorn-Knopp normalises the codes over the global batch: its sums are all-reduced.
SHARDED = ShardedLoss(registered_loss, global_scores, ("scores",))


@on_two_ranks
def swav_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_solve_sinkhorn_over_the_global_batch() -> None:
    # Three Sinkhorn iterations on exp(scores / 0.05) amplify float32 rounding: the
    # ranks' all-reduced sums and the one process's sums add in different orders, and
    # the gradients differ by up to 1e-5 (relative 1e-4) between the two.
    SHARDED.assert_ranks_match_one_process(
        two_rank_results(swav_on_each_rank), atol=2e-5, rtol=2e-4
    )

"""NT-Xent against a direct loop-based reference, in one process and on two gloo ranks."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
import torch

from hookbus import LOSSES, Config
from hookbus.parts.losses import NTXentLoss, build_loss
from tests.loss_reference import ShardedLoss, on_two_ranks, two_rank_results


def reference_pair(first: torch.Tensor, second: torch.Tensor, temperature: float) -> torch.Tensor:
    """-log(exp(s_ip / T) / sum_{k != i} exp(s_ik / T)), averaged over the 2B samples."""
    z = torch.cat([first, second])
    z = z / z.norm(dim=1, keepdim=True)
    count, size = len(z), len(first)
    total = z.new_zeros(())
    for i in range(count):
        positive = (i + size) % count
        numerator = torch.exp(z[i] @ z[positive] / temperature)
        denominator = sum(torch.exp(z[i] @ z[k] / temperature) for k in range(count) if k != i)
        total = total - torch.log(numerator / denominator)
    return total / count


def reference(views: list[torch.Tensor], temperature: float) -> torch.Tensor:
    pairs = list(combinations(views, 2))
    return sum(reference_pair(a, b, temperature) for a, b in pairs) / len(pairs)


def embeddings(count: int, size: int = 6, dim: int = 5, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(size, dim, generator=generator, dtype=torch.float64).requires_grad_()
        for _ in range(count)
    ]


def value_and_grads(
    loss: torch.Tensor, views: list[torch.Tensor]
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    return loss.detach(), torch.autograd.grad(loss, views)


def assert_same_value_and_gradient(count: int, temperature: float) -> None:
    views = embeddings(count)
    ours = NTXentLoss(temperature)({"embeddings": views}, {})
    expected = reference(views, temperature)
    ours_value, ours_grads = value_and_grads(ours, views)
    ref_value, ref_grads = value_and_grads(expected, views)
    torch.testing.assert_close(ours_value.double(), ref_value, atol=1e-5, rtol=0)
    for got, want in zip(ours_grads, ref_grads, strict=True):
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)


def test_two_views_match_the_reference_in_value_and_gradient() -> None:
    assert_same_value_and_gradient(2, temperature=0.5)


def test_low_temperature_matches_the_reference() -> None:
    assert_same_value_and_gradient(2, temperature=0.1)


def test_three_views_average_the_loss_over_view_pairs() -> None:
    assert_same_value_and_gradient(3, temperature=0.5)


def test_identical_orthogonal_views_give_the_known_value() -> None:
    # Positives have similarity 1, the 2B - 2 other samples similarity 0.
    z = torch.eye(4)
    loss = NTXentLoss(1.0)({"embeddings": [z, z.clone()]}, {})
    expected = -math.log(math.e / (math.e + 6))
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_one_view_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least 2 views"):
        NTXentLoss(0.5)({"embeddings": embeddings(1)}, {})


def test_registry_builds_the_configured_loss() -> None:
    loss = build_loss(Config.model_validate({"loss": {"temperature": 0.2}}))
    assert isinstance(loss, NTXentLoss)
    assert loss.temperature == 0.2
    assert "nt_xent" in LOSSES


def global_embeddings() -> dict[str, list[torch.Tensor]]:
    """Two views of a global batch of 8, the same on every rank."""
    return {"embeddings": [view.detach() for view in embeddings(2, size=8)]}


# The gather returns the global batch, so each rank's samples are classified among every
# rank's, and gradients reach every rank's embeddings as its backward sends them.
SHARDED = ShardedLoss(
    lambda out: NTXentLoss(0.5)(out, {}),
    global_embeddings,
    ("embeddings",),
    reference=lambda out: reference(out["embeddings"], 0.5),
)


@on_two_ranks
def nt_xent_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_use_global_negatives() -> None:
    ranks = two_rank_results(nt_xent_on_each_rank)
    SHARDED.assert_ranks_match_one_process(ranks, atol=1e-5, rtol=0)

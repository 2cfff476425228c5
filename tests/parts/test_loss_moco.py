"""The MoCo v2 loss against a direct loop-based reference."""

from __future__ import annotations

import math

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import MocoLoss, build_loss
from tests.loss_reference import assert_same_value_and_gradients, log_softmax_entry, tensors, unit


def reference(queries: list, keys: list, queue: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over ordered view pairs and samples of -log softmax(q.k+ / T among q.k+, q.queue)."""
    terms = []
    for a, query_view in enumerate(queries):
        for b, key_view in enumerate(keys):
            if a == b:
                continue
            for i in range(len(query_view)):
                q = unit(query_view[i])
                logits = [q @ unit(key_view[i]) / temperature]
                logits += [q @ negative / temperature for negative in queue]
                terms.append(-log_softmax_entry(logits, 0))
    return sum(terms) / len(terms)


def normalised_queue(size: int, dim: int = 5) -> torch.Tensor:
    queue = torch.randn(size, dim, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return queue / queue.norm(dim=1, keepdim=True)


def test_two_views_with_a_queue_match_the_reference() -> None:
    queries, keys = tensors(2), tensors(2, seed=1)
    queue = normalised_queue(9)
    output = {"embeddings": queries, "teacher_embeddings": keys, "queue": queue}
    ours = MocoLoss(0.2)(output, {})
    assert_same_value_and_gradients(ours, reference(queries, keys, queue, 0.2), queries)


def test_three_views_use_every_ordered_pair() -> None:
    queries, keys = tensors(3), tensors(3, seed=1)
    queue = normalised_queue(4)
    output = {"embeddings": queries, "teacher_embeddings": keys, "queue": queue}
    ours = MocoLoss(0.5)(output, {})
    assert_same_value_and_gradients(ours, reference(queries, keys, queue, 0.5), queries)


def test_no_gradient_reaches_the_keys() -> None:
    queries, keys = tensors(2), tensors(2, seed=1)
    output = {"embeddings": queries, "teacher_embeddings": keys, "queue": normalised_queue(3)}
    loss = MocoLoss(0.2)(output, {})
    assert torch.autograd.grad(loss, keys, allow_unused=True) == (None, None)


def test_without_negatives_the_loss_is_zero() -> None:
    queries, keys = tensors(2), tensors(2, seed=1)
    loss = MocoLoss(0.2)({"embeddings": queries, "teacher_embeddings": keys}, {})
    assert float(loss.detach()) == 0.0


def test_identical_query_and_key_against_orthogonal_negatives() -> None:
    query = torch.tensor([[1.0, 0.0, 0.0]])
    queue = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    output = {"embeddings": [query, query], "teacher_embeddings": [query, query], "queue": queue}
    expected = -math.log(math.exp(1 / 0.5) / (math.exp(1 / 0.5) + 2))
    assert float(MocoLoss(0.5)(output, {})) == pytest.approx(expected)


def test_missing_keys_name_the_hook() -> None:
    with pytest.raises(KeyError, match="momentum_teacher"):
        MocoLoss(0.2)({"embeddings": tensors(2)}, {})


def test_built_from_the_moco_section() -> None:
    cfg = validate_config({"loss": {"name": "moco", "moco": {"temperature": 0.3}}})
    loss = build_loss(cfg)
    assert isinstance(loss, MocoLoss)
    assert loss.temperature == 0.3

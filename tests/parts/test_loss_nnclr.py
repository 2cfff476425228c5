"""The NNCLR loss against the paper's equation, written out element by element.

For views ``a != b``, with ``n_i = NN(z_i^a, Q)`` and ``p_k = p_k^b`` unit vectors::

    loss_i = -log( exp(n_i . p_i / T) / sum_k exp(n_i . p_k / T) )

the mean over the rows and the ordered pairs of views. On two gloo ranks, each holding
its shard of a fixed global batch, the loss and gradients are those of one process on the
whole batch.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import NnclrLoss, build_loss
from tests.loss_reference import (
    ShardedLoss,
    assert_same_value_and_gradients,
    log_softmax_entry,
    on_two_ranks,
    tensors,
    two_rank_results,
    unit,
)
from tests.tiny_data import tiny_recipe, train_tiny

ROOT = Path(__file__).resolve().parents[2]
GLOBAL_BATCH, DIM = 8, 5


def reference(neighbours: list, predictions: list, temperature: float) -> torch.Tensor:
    """Mean over ordered view pairs and rows of the paper's per-row loss."""
    terms = []
    for a, neighbour_view in enumerate(neighbours):
        for b, prediction_view in enumerate(predictions):
            if a == b:
                continue
            for i in range(len(neighbour_view)):
                n = unit(neighbour_view[i])
                logits = [n @ unit(p) / temperature for p in prediction_view]
                terms.append(-log_softmax_entry(logits, i))
    return sum(terms) / len(terms)


def output(neighbours: list, predictions: list) -> dict:
    return {"neighbours": neighbours, "predictions": predictions}


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_two_views_match_the_paper_in_value_and_gradient(temperature: float) -> None:
    neighbours, predictions = tensors(2, seed=1), tensors(2)
    ours = NnclrLoss(temperature)(output(neighbours, predictions), {})
    expected = reference(neighbours, predictions, temperature)
    assert_same_value_and_gradients(ours, expected, predictions)


def test_three_views_use_every_ordered_pair() -> None:
    neighbours, predictions = tensors(3, rows=4, seed=1), tensors(3, rows=4)
    ours = NnclrLoss(0.2)(output(neighbours, predictions), {})
    assert_same_value_and_gradients(ours, reference(neighbours, predictions, 0.2), predictions)


def test_no_gradient_reaches_the_neighbours() -> None:
    neighbours, predictions = tensors(2, seed=1), tensors(2)
    loss = NnclrLoss(0.1)(output(neighbours, predictions), {})
    assert torch.autograd.grad(loss, neighbours, allow_unused=True) == (None, None)


def test_the_negatives_are_the_other_views_predictions_of_the_batch() -> None:
    # Row 0's neighbour points along its own prediction, orthogonal to the other one.
    n = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[2.0, 0.0], [0.0, 3.0]])
    loss = NnclrLoss(0.5)(output([n, n], [p, p]), {})
    expected = -math.log(math.exp(1 / 0.5) / (math.exp(1 / 0.5) + 1))
    assert float(loss) == pytest.approx(expected)


def test_gradcheck_in_float64() -> None:
    neighbours, predictions = tensors(2, rows=4, cols=3, seed=1), tensors(2, rows=4, cols=3)
    loss = NnclrLoss(0.3)
    assert torch.autograd.gradcheck(
        lambda p, q: loss(output([n.detach() for n in neighbours], [p, q]), {}),
        tuple(predictions),
    )


def test_missing_neighbours_name_the_hook() -> None:
    with pytest.raises(KeyError, match="nnclr_support"):
        NnclrLoss(0.1)({"predictions": tensors(2)}, {})


def test_missing_predictions_name_the_predictor() -> None:
    with pytest.raises(KeyError, match="model.predictor.dims"):
        NnclrLoss(0.1)({"neighbours": tensors(2)}, {})


def test_built_from_the_nnclr_section() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "nnclr", "nnclr": {"temperature": 0.2, "queue_size": 64}},
            "model": {"predictor": {"dims": [64, 32, 64]}, "head": {"dims": [128, 64]}},
        }
    )
    loss = build_loss(cfg)
    assert isinstance(loss, NnclrLoss)
    assert loss.temperature == 0.2
    assert cfg.loss.nnclr.queue_size == 64


def test_defaults_are_the_papers() -> None:
    section = validate_config({}).loss.nnclr
    assert (section.temperature, section.queue_size) == (0.1, 98_304)


@pytest.mark.parametrize(
    ("settings", "path"),
    [({"temperature": 0}, "temperature"), ({"queue_size": 0}, "queue_size"), ({"k": 1}, "k")],
)
def test_bad_settings_are_rejected(settings: dict, path: str) -> None:
    with pytest.raises(ValueError, match=rf"loss\.nnclr\.{path}"):
        validate_config(
            {
                "loss": {"name": "nnclr", "nnclr": settings},
                "model": {"predictor": {"dims": [64, 64]}},
            }
        )


def test_a_run_without_a_predictor_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"nnclr needs a predictor: set model\.predictor\.dims"):
        validate_config({"loss": {"name": "nnclr"}})


def global_batch() -> dict[str, list[torch.Tensor]]:
    """Neighbours and predictions of the global batch, per view, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    views = [torch.randn(GLOBAL_BATCH, DIM, generator=generator) for _ in range(4)]
    return output(views[:2], views[2:])


# Each rank's rows are scored against the gathered predictions of both ranks: the mean of
# the ranks' losses is the loss of the global batch.
SHARDED = ShardedLoss(lambda out: NnclrLoss(0.1)(out, {}), global_batch, ("predictions",))


@on_two_ranks
def nnclr_on_each_rank() -> dict:
    return SHARDED.on_rank()


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process_on_the_whole_batch() -> None:
    SHARDED.assert_ranks_match_one_process(two_rank_results(nnclr_on_each_rank))


@pytest.mark.slow
def test_the_digits_recipe_trains_an_epoch_on_the_tiny_data_set(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "nnclr_digits",
        tmp_path / "run",
        "model.backbone.width=4",
        "model.head.dims=[16, 32, 16]",
        "model.predictor.dims=[16, 32, 16]",
        "loss.nnclr.queue_size=20",
    )
    assert cfg.loss.name == "nnclr"
    state = train_tiny(cfg)
    support = next(hook for hook in state.hooks if hook.name == "nnclr_support")
    # 3 steps of 8 first-view embeddings into 20 rows: full, the write position wrapped.
    assert (support.buffer.filled, support.buffer.position) == (20, 4)

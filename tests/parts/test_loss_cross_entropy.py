"""The classification loss against its equation, written out element by element.

With label smoothing ``e`` over ``C`` classes, a sample of label ``y`` has the target
``q_c = 1 - e + e / C`` for ``c = y`` and ``e / C`` otherwise, and costs
``-sum_c q_c log softmax(z)_c``; the loss is the mean over the batch.
"""

from __future__ import annotations

import pytest
import torch

from hookbus.config import validate_config
from hookbus.engine.errors import ConfigError
from hookbus.parts.losses import ClassificationLoss, build_loss
from tests.loss_reference import assert_same_value_and_gradients, log_softmax_entry, tensors


def reference(logits: torch.Tensor, labels: list[int], smoothing: float) -> torch.Tensor:
    classes = logits.shape[1]
    total = logits.new_zeros(())
    for row, label in zip(logits, labels, strict=True):
        terms = list(row)
        for c in range(classes):
            target = (1 - smoothing) * (c == label) + smoothing / classes
            total = total - target * log_softmax_entry(terms, c)
    return total / len(labels)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5])
def test_the_loss_is_the_cross_entropy_against_the_smoothed_target(smoothing: float) -> None:
    (logits,) = tensors(1, rows=4, cols=5)
    labels = [0, 3, 3, 4]
    ours = ClassificationLoss(smoothing)({"logits": logits}, {"label": torch.tensor(labels)})
    assert_same_value_and_gradients(ours, reference(logits, labels, smoothing), [logits])


def test_smoothing_costs_a_confident_right_answer_something() -> None:
    logits = torch.tensor([[20.0, 0.0, 0.0]])
    label = {"label": torch.tensor([0])}
    assert float(ClassificationLoss()({"logits": logits}, label)) < 1e-6
    smoothed = float(ClassificationLoss(0.3)({"logits": logits}, label))
    assert smoothed == pytest.approx(0.2 * 20, rel=1e-4)  # 2 of 3 classes get 0.1 each


def test_built_from_its_section_and_bounded() -> None:
    raw = {
        "loss": {"name": "cross_entropy", "cross_entropy": {"label_smoothing": 0.1}},
        "model": {"linear_eval": {"enabled": True}},
        "data": {"num_views": 1},
    }
    loss = build_loss(validate_config(raw, "test"))
    assert isinstance(loss, ClassificationLoss) and loss.label_smoothing == 0.1
    raw["loss"]["cross_entropy"]["label_smoothing"] = 1.0
    with pytest.raises(ConfigError, match=r"loss\.cross_entropy\.label_smoothing"):
        validate_config(raw, "test")
    with pytest.raises(ValueError, match="label_smoothing"):
        ClassificationLoss(-0.1)

"""The DINO loss against a direct loop-based reference."""

from __future__ import annotations

import pytest
import torch

from hookbus.config import validate_config
from hookbus.parts.losses import DinoLoss, build_loss
from tests.loss_reference import assert_same_value_and_gradients, log_softmax_entry, tensors


def reference(student, teacher, center, teacher_t, student_t) -> torch.Tensor:
    """Mean over (global view g, other view v) of -sum_k p_t(g)_k log p_s(v)_k, batch mean."""
    terms = []
    for g, teacher_view in enumerate(teacher):
        for v, student_view in enumerate(student):
            if v == g:
                continue
            losses = []
            for n in range(len(student_view)):
                t_logits = [
                    (teacher_view[n, k] - center[k]) / teacher_t for k in range(len(center))
                ]
                s_logits = [student_view[n, k] / student_t for k in range(len(center))]
                targets = [torch.exp(log_softmax_entry(t_logits, k)) for k in range(len(center))]
                losses.append(
                    -sum(targets[k] * log_softmax_entry(s_logits, k) for k in range(len(center)))
                )
            terms.append(sum(losses) / len(losses))
    return sum(terms) / len(terms)


def output(student, teacher, center, temperature) -> dict:
    return {
        "scores": student,
        "teacher_scores": teacher,
        "teacher_center": center,
        "teacher_temperature": temperature,
    }


@pytest.mark.parametrize("local_views", [0, 2])
def test_matches_the_reference_with_and_without_local_views(local_views: int) -> None:
    student = tensors(2 + local_views, rows=4, cols=6)
    teacher = [t.detach() for t in tensors(2, rows=4, cols=6, seed=1)]
    center = torch.linspace(-0.5, 0.5, 6, dtype=torch.float64)
    ours = DinoLoss(0.1)(output(student, teacher, center, 0.04), {})
    expected = reference(student, teacher, center, 0.04, 0.1)
    assert_same_value_and_gradients(ours, expected, student)


def test_the_center_changes_the_targets() -> None:
    student = tensors(2, rows=3, cols=4)
    teacher = [t.detach() for t in tensors(2, rows=3, cols=4, seed=1)]
    zero = DinoLoss(0.1)(output(student, teacher, torch.zeros(4), 0.04), {})
    shifted = DinoLoss(0.1)(output(student, teacher, torch.tensor([5.0, 0, 0, 0]), 0.04), {})
    assert float(zero.detach()) != pytest.approx(float(shifted.detach()))


def test_missing_teacher_outputs_name_the_hooks() -> None:
    with pytest.raises(KeyError, match="dino_centering"):
        DinoLoss(0.1)({"scores": tensors(2)}, {})


def test_built_from_its_section() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "dino", "dino": {"student_temperature": 0.2}},
            "model": {"prototypes": {"count": 16, "weight_norm": True}},
        }
    )
    loss = build_loss(cfg)
    assert isinstance(loss, DinoLoss)
    assert loss.student_temperature == 0.2

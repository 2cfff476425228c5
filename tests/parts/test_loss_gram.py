"""DINOv3's Gram loss against the authors' arithmetic (``GramLoss`` of their code,
image-level), written out entry by entry in float64: each patch feature divided by its
norm, ``G[b, i, j] = sum_d x[b, i, d] x[b, j, d]`` for the student and the teacher, the
negative entries cleared as each option says, and the mean of ``(G_s - G_t)^2`` over
every entry of every image. On two gloo ranks each holding its images, the ranks' mean
loss and DDP's mean gradient are those of one process on the whole batch."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from hookbus.config import validate_config
from hookbus.parts.losses import build_loss
from hookbus.parts.losses.gram import Dinov3Loss, gram_loss
from tests.loss_reference import (
    assert_same_value_and_gradients,
    on_two_ranks,
    shard,
    two_rank_results,
)

IMAGES, PATCHES, DIM = 4, 3, 5


def features(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(IMAGES, PATCHES, DIM, generator=generator, dtype=torch.float64)


def reference(student: torch.Tensor, teacher: torch.Tensor, normalize: bool, option: str):
    """The authors' arithmetic on scalars (options: keep, remove, remove_teacher)."""

    def gram(x: torch.Tensor) -> list[list[list[torch.Tensor]]]:
        rows = x
        if normalize:
            rows = torch.stack(
                [
                    torch.stack([row / torch.sqrt(sum(v * v for v in row)) for row in image])
                    for image in x
                ]
            )
        return [
            [[sum(a[d] * b[d] for d in range(DIM)) for b in image] for a in image] for image in rows
        ]

    s, t = gram(student), gram(teacher.detach())
    terms = []
    for b in range(IMAGES):
        for i in range(PATCHES):
            for j in range(PATCHES):
                student_entry, teacher_entry = s[b][i][j], t[b][i][j]
                if option in ("remove", "remove_teacher") and teacher_entry < 0:
                    teacher_entry = teacher_entry * 0
                # remove_teacher: the authors' code tests the student's entry against the
                # teacher's already-cleared one, which is never negative: kept.
                if option == "remove" and student_entry < 0:
                    student_entry = student_entry * 0
                terms.append((student_entry - teacher_entry) ** 2)
    return sum(terms) / len(terms)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("option", ["keep", "remove", "remove_teacher"])
def test_the_gram_loss_equals_the_authors_arithmetic(normalize: bool, option: str) -> None:
    student, teacher = features(0).requires_grad_(), features(1)
    ours = gram_loss(student, teacher, normalize=normalize, negatives=option)  # type: ignore[arg-type]
    expected = reference(student, teacher, normalize, option)
    assert_same_value_and_gradients(ours, expected, [student], tol=1e-12)


def test_the_options_differ_on_these_features() -> None:
    student, teacher = features(0), features(1)
    values = {
        option: float(gram_loss(student, teacher, negatives=option))  # type: ignore[arg-type]
        for option in ("keep", "remove", "remove_teacher")
    }
    assert len(set(values.values())) == 3


def test_no_gradient_reaches_the_teacher() -> None:
    student, teacher = features(0).requires_grad_(), features(1).requires_grad_()
    gram_loss(student, teacher).backward()
    assert teacher.grad is None and student.grad is not None


def test_features_of_two_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="one shape"):
        gram_loss(features(0), features(1)[:, :2])


def test_identical_features_give_zero() -> None:
    assert float(gram_loss(features(0), features(0))) == 0.0


def dinov2_output() -> dict:
    """A DINOv2 output of 2 global views of 4 images, Sinkhorn-Knopp targets."""
    generator = torch.Generator().manual_seed(0)
    scores = [torch.randn(IMAGES, 6, generator=generator, dtype=torch.float64) for _ in range(2)]
    masks = torch.zeros(2 * IMAGES, PATCHES, dtype=torch.bool)
    masks[0, 1] = True
    return {
        "scores": scores,
        "teacher_scores": [score.flip(0) for score in scores],
        "patch_scores": torch.randn(1, 6, generator=generator, dtype=torch.float64),
        "teacher_patch_scores": torch.randn(1, 6, generator=generator, dtype=torch.float64),
        "patch_masks": masks,
        "view_features": [torch.randn(IMAGES, DIM, generator=generator, dtype=torch.float64)],
        "teacher_temperature": 0.04,
        "patch_tokens": features(2).repeat(2, 1, 1),
        "gram_teacher_patch_tokens": features(3).repeat(2, 1, 1),
    }


def test_the_dinov3_loss_is_dinov2s_plus_the_weighted_gram_loss() -> None:
    loss = Dinov3Loss(0.1, koleo_weight=0.0)
    output = dinov2_output()
    without = float(loss({**output, "gram_weight": 0.0}, {}))
    with_gram = float(loss({**output, "gram_weight": 2.0}, {}))
    gram = float(gram_loss(output["patch_tokens"], output["gram_teacher_patch_tokens"]))
    assert gram > 0
    assert with_gram == pytest.approx(without + 2.0 * gram, rel=1e-12)


def test_the_dinov3_loss_without_the_gram_teachers_tokens_says_which_hook_writes_them() -> None:
    output = dinov2_output()
    del output["gram_teacher_patch_tokens"]
    with pytest.raises(KeyError, match="gram_teacher hook"):
        Dinov3Loss(0.1)({**output, "gram_weight": 1.0}, {})


def test_the_config_builds_the_dinov3_loss_with_its_options() -> None:
    cfg = validate_config(
        {
            "data": {"num_views": 2},
            "model": {
                "backbone": {"name": "vit_tiny"},
                "prototypes": {"count": 16, "weight_norm": True},
            },
            "loss": {"name": "dinov3", "dinov3": {"gram_negatives": "remove"}},
        }
    )
    loss = build_loss(cfg)
    assert isinstance(loss, Dinov3Loss) and loss.negatives == "remove" and loss.normalize


def test_a_gram_image_size_below_the_views_is_refused() -> None:
    with pytest.raises(Exception, match="gram_image_size 8 is below data.image_size 16"):
        validate_config(
            {
                "data": {"image_size": 16},
                "model": {
                    "backbone": {"name": "vit_tiny"},
                    "prototypes": {"count": 16, "weight_norm": True},
                },
                "loss": {"name": "dinov3", "dinov3": {"gram_image_size": 8}},
            }
        )


@on_two_ranks
def gram_on_each_rank() -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    student = shard(features(0), rank, world).requires_grad_()
    loss = gram_loss(student, shard(features(1), rank, world))
    loss.backward()
    return {"loss": loss.detach(), "grad": student.grad}


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process_on_the_whole_batch() -> None:
    ranks = two_rank_results(gram_on_each_rank)
    student = features(0).requires_grad_()
    expected = gram_loss(student, features(1))
    (wanted,) = torch.autograd.grad(expected, [student])
    mean = sum(saved["loss"] for saved in ranks) / len(ranks)
    torch.testing.assert_close(mean, expected.detach(), rtol=1e-12, atol=1e-12)
    for rank, saved in enumerate(ranks):  # DDP averages the ranks' gradients
        torch.testing.assert_close(
            saved["grad"] / len(ranks), shard(wanted, rank, len(ranks)), rtol=1e-12, atol=1e-12
        )

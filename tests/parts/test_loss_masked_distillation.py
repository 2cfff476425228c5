"""The iBOT and DINOv2 losses against the papers' equations, written out on small float64
tensors, and against DINOv2's code where it differs (KoLeo's distance), on one process
and on two gloo ranks (Sinkhorn-Knopp's sums and the masked-patch count all-reduced)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist

from hookbus.config import validate_config
from hookbus.parts.losses import build_loss
from hookbus.parts.losses.masked_distillation import (
    MaskedDistillationLoss,
    koleo,
    masked_patch_loss,
)
from tests.loss_reference import (
    assert_same_value_and_gradients,
    log_softmax_entry,
    on_two_ranks,
    tensors,
    two_rank_results,
    unit,
)
from tests.parts.test_loss_swav import reference_sinkhorn

STUDENT_T = 0.1
TEACHER_T = 0.07


def paper_koleo(rows: torch.Tensor) -> torch.Tensor:
    """``-1/n sum_i log(min_{j != i} ||x_i - x_j||)`` on the L2-normalised rows."""
    points = [unit(row) for row in rows]
    total = 0
    for i, x in enumerate(points):
        distances = [
            torch.sqrt(sum((a - b) ** 2 for a, b in zip(x, y, strict=True)))
            for j, y in enumerate(points)
            if j != i
        ]
        total = total + torch.log(min(distances, key=lambda distance: float(distance.detach())))
    return -total / len(points)


def code_koleo(rows: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """DINOv2's formula: the nearest row by inner product, ``PairwiseDistance(eps)``,
    ``-mean(log(d + eps))``."""
    x = torch.nn.functional.normalize(rows, eps=eps, p=2, dim=-1)
    dots = x @ x.T
    dots = dots - 3 * torch.eye(len(x), dtype=x.dtype)
    nearest = dots.detach().argmax(dim=1)
    distances = torch.nn.PairwiseDistance(2, eps=eps)(x, x[nearest])
    return -torch.log(distances + eps).mean()


def test_koleo_is_the_papers_entropy_estimate() -> None:
    (rows,) = tensors(1, rows=7, cols=4)
    assert_same_value_and_gradients(koleo(rows), paper_koleo(rows), [rows])


def test_koleo_is_dinov2_codes_formula_to_rounding() -> None:
    (rows,) = tensors(1, rows=9, cols=3, seed=3)
    assert_same_value_and_gradients(koleo(rows), code_koleo(rows), [rows], tol=1e-12)


def test_koleo_of_spread_points_is_lower_than_of_clustered_ones() -> None:
    angles = torch.arange(6, dtype=torch.float64) * (2 * math.pi / 6)
    spread = torch.stack([angles.cos(), angles.sin()], dim=1)
    clustered = torch.stack([(angles / 20).cos(), (angles / 20).sin()], dim=1)
    assert float(koleo(spread)) == pytest.approx(-math.log(1.0), abs=1e-6)  # neighbours 1 apart
    assert float(koleo(clustered)) > float(koleo(spread)) + 2


def masks_of(counts: list[int], patches: int) -> torch.Tensor:
    """Masks ``[len(counts), patches]`` with the first ``counts[i]`` patches of row i."""
    return torch.tensor([[p < count for p in range(patches)] for count in counts])


def paper_patch_loss(student, targets, masks, temperature) -> torch.Tensor:
    """iBOT's L_MIM: per image, the mean over its masked patches of
    ``-sum_k t_k log softmax(s / T)_k``; then the mean over the images."""
    total, row = 0, 0
    for image in masks:
        count = int(image.sum())
        terms = 0
        for _ in range(count):
            logits = [value / temperature for value in student[row]]
            terms = terms - sum(
                targets[row][k] * log_softmax_entry(logits, k) for k in range(len(logits))
            )
            row += 1
        total = total + (terms / count if count else 0)
    return total / len(masks)


def test_masked_patch_loss_is_the_mean_over_each_images_masked_patches() -> None:
    masks = masks_of([2, 0, 3, 1], patches=4)
    student, teacher = tensors(2, rows=6, cols=5)
    targets = torch.softmax(teacher.detach() / TEACHER_T, dim=1)
    ours = masked_patch_loss(student, targets, masks, STUDENT_T)
    assert_same_value_and_gradients(
        ours, paper_patch_loss(student, targets, masks, STUDENT_T), [student]
    )


def test_masked_patch_loss_of_no_masked_patch_is_zero() -> None:
    masks = masks_of([0, 0], patches=4)
    assert float(masked_patch_loss(torch.zeros(0, 5), torch.zeros(0, 5), masks, 0.1)) == 0


def outputs(centering: bool) -> dict:
    """A float64 model output: 2 global views and 1 local view of 4 images, 6 prototypes,
    masked patches 2, 0, 1, 3 (view 0) and 1, 0, 2, 0 (view 1) of 4."""
    student = tensors(3, rows=4, cols=6)
    teacher = tensors(2, rows=4, cols=6, seed=1)
    features = tensors(3, rows=4, cols=5, seed=2)
    patch_student, patch_teacher = tensors(2, rows=9, cols=6, seed=3)
    output = {
        "scores": student,
        "teacher_scores": [view.detach() for view in teacher],
        "view_features": features,
        "patch_masks": masks_of([2, 0, 1, 3, 1, 0, 2, 0], patches=4),
        "patch_scores": patch_student,
        "teacher_patch_scores": patch_teacher.detach(),
        "teacher_temperature": TEACHER_T,
    }
    if centering:
        generator = torch.Generator().manual_seed(4)
        output["teacher_center"] = torch.randn(6, generator=generator, dtype=torch.float64)
        output["teacher_patch_center"] = torch.randn(6, generator=generator, dtype=torch.float64)
    return output


def cross_entropy(target: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """``-sum_k t_k log softmax(s / T_student)_k`` averaged over the rows."""
    rows = []
    for t, s in zip(target, student, strict=True):
        logits = [value / STUDENT_T for value in s]
        rows.append(-sum(t[k] * log_softmax_entry(logits, k) for k in range(len(logits))))
    return sum(rows) / len(rows)


def paper_loss(output: dict, targets: list, patch_targets, koleo_weight: float) -> torch.Tensor:
    """``L_cls + L_MIM + w * sum_g L_koleo(cls_g)`` with DINO's pairs ``(g, v != g)``."""
    pairs = [
        cross_entropy(target, view)
        for g, target in enumerate(targets)
        for v, view in enumerate(output["scores"])
        if v != g
    ]
    patch = paper_patch_loss(
        output["patch_scores"], patch_targets, output["patch_masks"], STUDENT_T
    )
    koleo_sum = sum(paper_koleo(view) for view in output["view_features"][:2])
    return sum(pairs) / len(pairs) + patch + koleo_weight * koleo_sum


def centred_softmax(scores: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
    return torch.softmax((scores - center) / TEACHER_T, dim=1)


def test_ibot_loss_with_running_centers_is_the_papers() -> None:
    output = outputs(centering=True)
    loss = MaskedDistillationLoss(STUDENT_T, centering="centering", koleo_weight=0.0)
    targets = [centred_softmax(view, output["teacher_center"]) for view in output["teacher_scores"]]
    patch_targets = centred_softmax(output["teacher_patch_scores"], output["teacher_patch_center"])
    inputs = [*output["scores"], output["patch_scores"]]
    assert_same_value_and_gradients(
        loss(output, {}), paper_loss(output, targets, patch_targets, 0.0), inputs
    )


def test_dinov2_loss_with_sinkhorn_targets_and_koleo_is_the_papers() -> None:
    output = outputs(centering=False)
    loss = MaskedDistillationLoss(STUDENT_T, sinkhorn_iterations=3, koleo_weight=0.1)
    # Sinkhorn-Knopp over both global views together, and over the masked patches.
    codes = reference_sinkhorn(torch.cat(output["teacher_scores"]), TEACHER_T, 3)
    patch_targets = reference_sinkhorn(output["teacher_patch_scores"], TEACHER_T, 3)
    inputs = [*output["scores"], output["patch_scores"], *output["view_features"]]
    assert_same_value_and_gradients(
        loss(output, {}),
        paper_loss(output, list(codes.split(4)), patch_targets, 0.1),
        inputs,
    )


def test_no_gradient_reaches_the_teacher_or_the_local_views_koleo() -> None:
    output = outputs(centering=False)
    teacher = [view.requires_grad_() for view in output["teacher_scores"]]
    MaskedDistillationLoss(STUDENT_T)(output, {}).backward()
    assert all(view.grad is None for view in teacher)
    assert output["view_features"][2].grad is None  # KoLeo reads the global views only


def test_dinov2_and_ibot_are_built_from_their_sections() -> None:
    base = {"model": {"backbone": {"name": "vit_tiny"}, "prototypes": {"count": 8}}}
    dinov2 = build_loss(
        validate_config(
            {**base, "loss": {"name": "dinov2", "dinov2": {"koleo_weight": 0.3}, "ibot": {}}}
        )
    )
    ibot = build_loss(validate_config({**base, "loss": {"name": "ibot"}}))
    assert isinstance(dinov2, MaskedDistillationLoss) and isinstance(ibot, MaskedDistillationLoss)
    assert (dinov2.centering, dinov2.koleo_weight, dinov2.sinkhorn_iterations) == (
        "sinkhorn_knopp",
        0.3,
        3,
    )
    assert (ibot.centering, ibot.koleo_weight) == ("centering", 0.0)


def test_the_loss_names_the_hooks_it_needs() -> None:
    output = outputs(centering=False)
    del output["teacher_patch_scores"]
    with pytest.raises(KeyError, match="momentum_teacher"):
        MaskedDistillationLoss(STUDENT_T)(output, {})


def rank_output(rank: int, world: int) -> dict:
    """Rank ``rank``'s share of :func:`outputs`: its images of each view and their masked
    patches; rank 0 has 3 of the 9 masked patches, rank 1 the other 6."""
    whole = outputs(centering=False)
    size = 4 // world
    rows = slice(rank * size, (rank + 1) * size)
    masks = whole["patch_masks"].view(2, 4, 4)
    per_image = masks.sum(dim=2).flatten()
    starts = torch.cat([torch.zeros(1, dtype=torch.long), per_image.cumsum(0)])
    images = [view * 4 + i for view in range(2) for i in range(rank * size, (rank + 1) * size)]
    patch_rows = torch.cat([torch.arange(starts[i], starts[i + 1]) for i in images])

    def share(tensor: torch.Tensor, index) -> torch.Tensor:
        return tensor[index].detach().clone().requires_grad_(tensor.requires_grad)

    return {
        "scores": [share(view, rows) for view in whole["scores"]],
        "teacher_scores": [share(view, rows) for view in whole["teacher_scores"]],
        "view_features": [share(view, rows) for view in whole["view_features"]],
        "patch_masks": masks[:, rows].reshape(-1, 4),
        "patch_scores": share(whole["patch_scores"], patch_rows),
        "teacher_patch_scores": share(whole["teacher_patch_scores"], patch_rows),
        "teacher_temperature": TEACHER_T,
    }


@on_two_ranks
def sinkhorn_targets_on_each_rank() -> dict:
    output = rank_output(dist.get_rank(), dist.get_world_size())
    loss = MaskedDistillationLoss(STUDENT_T, koleo_weight=0.0)(output, {})
    loss.backward()
    return {
        "loss": loss.detach(),
        "scores": [view.grad for view in output["scores"]],
        "patch_scores": output["patch_scores"].grad,
    }


def test_two_gloo_ranks_solve_sinkhorn_over_the_global_batch_and_all_masked_patches() -> None:
    # KoLeo is left out here: as in DINOv2 it reads each rank's own class tokens only.
    ranks = two_rank_results(sinkhorn_targets_on_each_rank)
    whole = outputs(centering=False)
    expected = MaskedDistillationLoss(STUDENT_T, koleo_weight=0.0)(whole, {})
    inputs = [*whole["scores"], whole["patch_scores"]]
    wanted = torch.autograd.grad(expected, inputs)
    mean = (ranks[0]["loss"] + ranks[1]["loss"]) / 2
    torch.testing.assert_close(mean, expected.detach(), atol=1e-12, rtol=1e-10)
    alone = MaskedDistillationLoss(STUDENT_T, koleo_weight=0.0)(rank_output(1, 2), {})
    assert (
        abs(float(alone.detach()) - float(ranks[1]["loss"])) > 1e-3
    )  # the ranks shared their sums
    for rank, saved in enumerate(ranks):
        local = rank_output(rank, 2)
        for view, grad in enumerate(saved["scores"]):
            want = wanted[view][rank * 2 : (rank + 1) * 2]
            torch.testing.assert_close(grad / 2, want, atol=1e-12, rtol=1e-10)
        mine = [i for i in range(9) if rank_rows(rank)[i]]
        torch.testing.assert_close(
            saved["patch_scores"] / 2, wanted[3][mine], atol=1e-12, rtol=1e-10
        )
        assert len(local["patch_scores"]) == len(mine)


def rank_rows(rank: int) -> list[bool]:
    """Which of the 9 masked patches (view 0: 2, 0, 1, 3; view 1: 1, 0, 2, 0) are rank
    ``rank``'s (images 0-1 are rank 0's, 2-3 rank 1's, in each view)."""
    counts = [2, 0, 1, 3, 1, 0, 2, 0]
    images = [0, 0, 1, 1, 0, 0, 1, 1]
    owners = [images[i] for i, count in enumerate(counts) for _ in range(count)]
    return [who == rank for who in owners]

"""The distillation losses equal a float64 transcription of the published arithmetic
(LightlyTrain's distillation v1 global loss, v2 dense loss, and their sum as v3 uses both),
value and gradient; the teacher queue is the same on two gloo ranks as in one process.

The transcriptions are written from the formulas, entry by entry: the global loss is
``KL(p_t || p_s)`` per image, ``p = softmax(<x, q_k> / T)`` over the queue rows ``q_k``,
averaged over the images (PyTorch's ``batchmean``); the dense loss the mean of the
squared differences of every patch feature, after the student's grid is resized
(bilinear, half-pixel centres) to the teacher's.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hookbus.hooks.methods.distillation_teacher import DistillationTeacherHook
from hookbus.parts.losses.distillation import DistillationLoss
from tests.loss_reference import (
    assert_same_value_and_gradients,
    on_two_ranks,
    shard,
    two_rank_results,
    unit,
)

T = 0.07


def random(*shape: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


def reference_global(
    student: torch.Tensor, teacher: torch.Tensor, queue: torch.Tensor
) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float64)
    for s_row, t_row in zip(student, teacher, strict=True):
        s_unit = unit(s_row)
        s_logits = [torch.dot(s_unit, q) / T for q in queue]
        t_logits = [torch.dot(t_row, q).detach() / T for q in queue]
        s_norm = torch.log(sum(torch.exp(v) for v in s_logits))
        t_norm = torch.log(sum(torch.exp(v) for v in t_logits))
        for s_logit, t_logit in zip(s_logits, t_logits, strict=True):
            log_p_t = t_logit - t_norm
            total = total + torch.exp(log_p_t) * (log_p_t - (s_logit - s_norm))
    return total / len(student)


def reference_dense(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """MSE after resizing ``student`` ``[B, h, w, D]`` to the teacher's ``[B, H, W, D]``
    grid by bilinear interpolation at half-pixel centres, written out."""
    batch, h, w, _ = student.shape
    _, rows, cols, _ = teacher.shape
    total = torch.zeros((), dtype=torch.float64)

    def source(index: int, size_in: int, size_out: int) -> tuple[int, int, float]:
        x = max((index + 0.5) * size_in / size_out - 0.5, 0.0)
        low = min(math.floor(x), size_in - 1)
        high = min(low + 1, size_in - 1)
        return low, high, x - low

    for b in range(batch):
        for i in range(rows):
            y0, y1, fy = source(i, h, rows)
            for j in range(cols):
                x0, x1, fx = source(j, w, cols)
                value = (
                    student[b, y0, x0] * (1 - fy) * (1 - fx)
                    + student[b, y0, x1] * (1 - fy) * fx
                    + student[b, y1, x0] * fy * (1 - fx)
                    + student[b, y1, x1] * fy * fx
                )
                total = total + ((value - teacher[b, i, j].detach()) ** 2).sum()
    return total / teacher.numel()


def global_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    student = random(4, 6, seed=0).requires_grad_()
    teacher = F.normalize(random(4, 6, seed=1), dim=1).requires_grad_()
    queue = F.normalize(random(5, 6, seed=2), dim=1)
    return student, teacher, queue


def test_the_global_loss_is_the_kl_over_the_queue() -> None:
    student, teacher, queue = global_inputs()
    loss = DistillationLoss("global", T)
    ours = loss(
        {"embeddings": [student], "teacher_embeddings": [teacher], "teacher_queue": queue}, {}
    )
    assert_same_value_and_gradients(
        ours, reference_global(student, teacher, queue), [student, teacher], tol=1e-9
    )


def test_the_global_loss_is_zero_when_the_student_is_the_teacher() -> None:
    _, teacher, queue = global_inputs()
    output = {"embeddings": [teacher * 3], "teacher_embeddings": [teacher], "teacher_queue": queue}
    loss = DistillationLoss("global", T)(output, {}).detach()
    assert float(loss) == pytest.approx(0.0, abs=1e-12)


def test_the_dense_loss_is_the_mse_on_the_teachers_grid() -> None:
    student = random(2, 3, 3, 4, seed=3).requires_grad_()
    teacher = random(2, 4, 4, 4, seed=4).requires_grad_()
    loss = DistillationLoss("dense")
    ours = loss({"patch_embeddings": [student], "teacher_patches": [teacher]}, {})
    assert_same_value_and_gradients(
        ours, reference_dense(student, teacher), [student, teacher], tol=1e-9
    )


def test_the_dense_loss_on_the_same_grid_is_plain_mse() -> None:
    student = random(2, 3, 3, 4, seed=5).requires_grad_()
    teacher = random(2, 3, 3, 4, seed=6)
    ours = DistillationLoss("dense")(
        {"patch_embeddings": [student], "teacher_patches": [teacher]}, {}
    )
    assert_same_value_and_gradients(ours, ((student - teacher) ** 2).mean(), [student], tol=1e-12)


def test_both_add_the_weighted_dense_loss_to_the_global_one_per_view_mean() -> None:
    student, teacher, queue = global_inputs()
    other = random(4, 6, seed=7).requires_grad_()
    patches = random(4, 2, 2, 6, seed=8).requires_grad_()
    target = random(4, 2, 2, 6, seed=9)
    output = {
        "embeddings": [student, other],
        "teacher_embeddings": [teacher, teacher],
        "teacher_queue": queue,
        "patch_embeddings": [patches, patches],
        "teacher_patches": [target, target],
    }
    ours = DistillationLoss("both", T, dense_weight=0.5)(output, {})
    reference = (
        reference_global(student, teacher, queue) + reference_global(other, teacher, queue)
    ) / 2 + 0.5 * ((patches - target) ** 2).mean()
    assert_same_value_and_gradients(ours, reference, [student, other, patches], tol=1e-9)


def queue_views() -> list[torch.Tensor]:
    """Two steps of two views of a global batch of 4 teacher embeddings."""
    return [F.normalize(random(4, 3, seed=seed), dim=1) for seed in range(10, 14)]


def queue_after(rank: int, world: int) -> torch.Tensor:
    hook = DistillationTeacherHook(queue_size=6)
    views = queue_views()
    for step in (views[:2], views[2:]):
        hook.enqueue([shard(view, rank, world) for view in step])
    queue = hook.buffer.newest_first()
    assert queue is not None
    return queue


@on_two_ranks
def teacher_queue_on_each_rank() -> dict[str, torch.Tensor]:
    import torch.distributed as dist

    return {"queue": queue_after(dist.get_rank(), dist.get_world_size())}


def test_the_teacher_queue_on_two_ranks_is_one_process_queue() -> None:
    ranks = two_rank_results(teacher_queue_on_each_rank)
    whole = queue_after(0, 1)
    for saved in ranks:
        torch.testing.assert_close(saved["queue"], whole, rtol=0, atol=0)
    # The newest first: the last step's second view, whole batch in rank order.
    torch.testing.assert_close(whole[:4].flip(0), queue_views()[3], rtol=0, atol=0)

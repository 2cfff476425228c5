"""The distillation losses: global (KL over a queue of teacher embeddings) and dense (MSE on
patch features), as LightlyTrain's distillation v1 and v2 compute them.

Global, for a view: the student's embeddings ``s`` and the teacher's ``t`` (``[B, D]``,
L2-normalised) are compared with the queue ``Q`` (``[K, D]``) of teacher embeddings:
``p_t = softmax(t Q^T / T)``, ``log p_s = log_softmax(s Q^T / T)`` and the loss is
``KL(p_t || p_s)`` summed over the queue and averaged over the batch (PyTorch's
``kl_div`` with ``batchmean``). The teacher's side has no gradient. Dense, for a view:
the student's projected patch features ``[B, h, w, D]``, resized bilinearly to the
teacher's grid ``[B, H, W, D]`` when they differ, and the mean of the squared
differences. Each is averaged over the views; ``both`` adds them (the dense one times
``dense_weight``).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32

Mode = Literal["global", "dense", "both"]


def global_distillation(
    student: Tensor, teacher: Tensor, queue: Tensor, temperature: float
) -> Tensor:
    """``KL(softmax(t Q^T / T) || softmax(s Q^T / T))``, batch mean, for ``student`` ``s``
    (normalised here), ``teacher`` ``t`` and ``queue`` ``Q`` (already normalised)."""
    student = F.normalize(at_least_float32(student), dim=1)
    queue = at_least_float32(queue).to(student.dtype)
    targets = F.softmax(at_least_float32(teacher).to(student.dtype) @ queue.T / temperature, dim=1)
    log_probabilities = F.log_softmax(student @ queue.T / temperature, dim=1)
    return F.kl_div(log_probabilities, targets.detach(), reduction="batchmean")


def dense_distillation(student: Tensor, teacher: Tensor) -> Tensor:
    """Mean squared error between the student's patch features ``[B, h, w, D]``, resized
    (bilinear) to the teacher's grid, and the teacher's ``[B, H, W, D]``."""
    student = at_least_float32(student)
    if student.shape[1:3] != teacher.shape[1:3]:
        grid = F.interpolate(
            student.permute(0, 3, 1, 2),
            size=tuple(teacher.shape[1:3]),
            mode="bilinear",
            align_corners=False,
        )
        student = grid.permute(0, 2, 3, 1)
    return F.mse_loss(student, at_least_float32(teacher).to(student.dtype).detach())


class DistillationLoss(nn.Module):
    """The distillation loss of ``mode``, from the model's ``output["embeddings"]`` and
    ``output["patch_embeddings"]`` (per view) and the ``distillation_teacher`` hook's
    ``teacher_embeddings``, ``teacher_patches`` and ``teacher_queue``."""

    def __init__(self, mode: Mode = "global", temperature: float = 0.07, dense_weight: float = 1.0):
        super().__init__()
        if mode not in ("global", "dense", "both"):
            raise ValueError(f"mode must be global, dense or both, got {mode!r}")
        self.mode = mode
        self.temperature = temperature
        self.dense_weight = dense_weight

    def forward(self, output: dict, batch: dict) -> Tensor:
        needed = ["teacher_embeddings", "teacher_queue"] if self.mode != "dense" else []
        needed += ["teacher_patches", "patch_embeddings"] if self.mode != "global" else []
        missing = [key for key in needed if key not in output]
        if missing:
            raise KeyError(
                f"DistillationLoss needs output{missing}: the distillation_teacher hook "
                "writes the teacher's"
            )
        losses = []
        if self.mode != "dense":
            queue = output["teacher_queue"]
            losses.append(
                torch.stack(
                    [
                        global_distillation(s, t, queue, self.temperature)
                        for s, t in zip(
                            output["embeddings"], output["teacher_embeddings"], strict=True
                        )
                    ]
                ).mean()
            )
        if self.mode != "global":
            dense = torch.stack(
                [
                    dense_distillation(s, t)
                    for s, t in zip(
                        output["patch_embeddings"], output["teacher_patches"], strict=True
                    )
                ]
            ).mean()
            losses.append(self.dense_weight * dense)
        return torch.stack(losses).sum()

"""The DINO loss: student views match the centred, sharpened teacher on the global views."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


def teacher_targets(teacher_scores: Tensor, center: Tensor, temperature: float) -> Tensor:
    """``softmax((teacher_scores - center) / temperature)``: centred and sharpened."""
    return F.softmax((at_least_float32(teacher_scores) - center) / temperature, dim=1)


class DinoLoss(nn.Module):
    """Self-distillation on ``output["scores"]`` (student, every view ``[B, K]``) and
    ``output["teacher_scores"]`` (teacher, the global views).

    Teacher targets are :func:`teacher_targets` with ``output["teacher_center"]``
    (``[K]``) and ``output["teacher_temperature"]``, both written by the
    ``dino_centering`` hook. For every global view ``g`` and every other view ``v``
    (global or local) the student's ``log softmax(s_v / student_temperature)`` is
    scored against the targets of ``g`` (cross-entropy, mean over the batch); the loss
    is the mean over those pairs. No gradient reaches the teacher. It runs in float32
    with autocast off.
    """

    def __init__(self, student_temperature: float) -> None:
        super().__init__()
        if student_temperature <= 0:
            raise ValueError(f"student_temperature must be positive, got {student_temperature}")
        self.student_temperature = student_temperature

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        missing = [
            key
            for key in ("teacher_scores", "teacher_center", "teacher_temperature")
            if key not in output
        ]
        if missing:
            raise KeyError(
                f"DinoLoss needs output{missing}: the momentum_teacher and dino_centering "
                "hooks write them (loss.name dino adds both to the default hooks)"
            )
        student = output["scores"]
        with torch.autocast(device_type=student[0].device.type, enabled=False):
            center = at_least_float32(output["teacher_center"])
            temperature = float(output["teacher_temperature"])
            targets = [
                teacher_targets(view.detach(), center, temperature)
                for view in output["teacher_scores"]
            ]
            log_probs = [
                F.log_softmax(at_least_float32(view) / self.student_temperature, dim=1)
                for view in student
            ]
            losses = [
                -(target * log_prob).sum(dim=1).mean()
                for g, target in enumerate(targets)
                for v, log_prob in enumerate(log_probs)
                if v != g
            ]
        if not losses:
            raise ValueError("DINO needs at least 2 views")
        return torch.stack(losses).mean()

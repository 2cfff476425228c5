"""DINOv3's Gram anchoring (Siméoni et al., "DINOv3", 2025): the Gram matrix of each
image's patch features pulled toward that of a Gram teacher, added to DINOv2's loss."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.parts.losses.masked_distillation import Centering, MaskedDistillationLoss
from hookbus.parts.losses.precision import at_least_float32

GramNegatives = Literal["keep", "remove", "remove_teacher"]
"""What happens to negative similarities, the authors' options: ``keep`` them (their
Gram-anchoring config), ``remove`` them from both Gram matrices (``remove_neg``), or
``remove_teacher``: set the teacher's to zero (``remove_only_teacher_neg``; the
authors' code then tests the student's against the teacher's already-cleared values,
so the student's stay as they are, and so here)."""


def gram_loss(
    student: Tensor, teacher: Tensor, *, normalize: bool = True, negatives: GramNegatives = "keep"
) -> Tensor:
    """The image-level Gram loss of patch features ``[B, N, D]``: with ``normalize`` each
    patch feature L2-normalised, ``G = X X^T`` per image ``[B, N, N]`` for the student
    and the teacher (no gradient reaches the teacher), negatives as ``negatives`` says,
    and the mean squared difference over every entry of every image."""
    if student.dim() != 3 or student.shape != teacher.shape:
        raise ValueError(
            f"the Gram loss compares patch features [B, N, D] of one shape, got "
            f"{tuple(student.shape)} and {tuple(teacher.shape)}"
        )
    if negatives not in ("keep", "remove", "remove_teacher"):
        raise ValueError(f"negatives must be keep, remove or remove_teacher, got {negatives!r}")
    student, teacher = at_least_float32(student), at_least_float32(teacher.detach())
    if normalize:
        student, teacher = F.normalize(student, dim=-1), F.normalize(teacher, dim=-1)
    student_gram = student @ student.transpose(-1, -2)
    teacher_gram = teacher @ teacher.transpose(-1, -2)
    if negatives != "keep":
        teacher_gram = torch.where(teacher_gram < 0, 0.0, teacher_gram)
    if negatives == "remove":
        student_gram = torch.where(student_gram < 0, 0.0, student_gram)
    return F.mse_loss(student_gram, teacher_gram)


class Dinov3Loss(MaskedDistillationLoss):
    """DINOv2's loss (:class:`MaskedDistillationLoss`) plus
    ``output["gram_weight"] * gram_loss(patch_tokens, gram_teacher_patch_tokens)``:
    the student's patch tokens of the global views (masked ones included, as the
    authors') against the Gram teacher's at the same places, written by the
    ``gram_teacher`` hook; a weight of 0 (before the Gram teacher is taken) adds
    nothing. ``normalize`` and ``negatives`` are :func:`gram_loss`'s."""

    def __init__(
        self,
        student_temperature: float,
        *,
        centering: Centering = "sinkhorn_knopp",
        sinkhorn_iterations: int = 3,
        patch_weight: float = 1.0,
        koleo_weight: float = 0.1,
        normalize: bool = True,
        negatives: GramNegatives = "keep",
    ) -> None:
        super().__init__(
            student_temperature,
            centering=centering,
            sinkhorn_iterations=sinkhorn_iterations,
            patch_weight=patch_weight,
            koleo_weight=koleo_weight,
        )
        if negatives not in ("keep", "remove", "remove_teacher"):
            raise ValueError(f"negatives must be keep, remove or remove_teacher, got {negatives!r}")
        self.normalize = normalize
        self.negatives = negatives

    def forward(self, output: dict, batch: dict) -> Tensor:
        """DINOv2's loss of ``output`` plus the weighted Gram loss."""
        loss = super().forward(output, batch)
        weight = output.get("gram_weight", 0.0)
        if not weight:
            return loss
        if "gram_teacher_patch_tokens" not in output:
            raise KeyError(
                "the DINOv3 loss needs output['gram_teacher_patch_tokens']: the gram_teacher "
                "hook writes them (loss.name dinov3 adds it to the default hooks)"
            )
        with torch.autocast(device_type=loss.device.type, enabled=False):
            gram = gram_loss(
                output["patch_tokens"],
                output["gram_teacher_patch_tokens"],
                normalize=self.normalize,
                negatives=self.negatives,
            )
        return loss + weight * gram

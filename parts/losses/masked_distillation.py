"""The losses of iBOT and DINOv2: DINO's class-token loss, iBOT's masked patch-token
loss, and (DINOv2) the KoLeo regulariser, with the teacher centred by Sinkhorn-Knopp or
by a running center."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.dino import teacher_targets
from hookbus.parts.losses.precision import at_least_float32
from hookbus.parts.losses.sinkhorn import sinkhorn

Centering = Literal["sinkhorn_knopp", "centering"]
"""How the teacher's scores become targets: Sinkhorn-Knopp at the teacher temperature
(DINOv2), or DINO's running center then a softmax at the teacher temperature (iBOT)."""

KOLEO_EPS = 1e-8
"""The epsilon of the KoLeo loss: in the L2 normalisation, in the distance (added to
each coordinate difference, as ``torch.nn.PairwiseDistance``) and in the logarithm."""


def koleo(features: Tensor, eps: float = KOLEO_EPS) -> Tensor:
    """The KoLeo regulariser of ``features`` ``[B, D]`` (Sablayrolles et al., 2019):
    ``-1/B sum_i log(d_i + eps)``, ``d_i`` the distance of the L2-normalised row ``i``
    to its nearest other row, ``||x_i - x_j + eps||`` as DINOv2's code measures it (the
    paper's ``||x_i - x_j||`` differs by ``eps`` in each coordinate). The nearest row
    is chosen without gradient (largest inner product); the distance carries it."""
    x = F.normalize(features, dim=1, eps=eps)
    with torch.no_grad():
        dots = x @ x.T
        dots.fill_diagonal_(-2.0)
        nearest = dots.argmax(dim=1)
    distances = (x - x[nearest] + eps).norm(dim=1)
    return -torch.log(distances + eps).mean()


def masked_patch_loss(
    student_scores: Tensor, targets: Tensor, masks: Tensor, student_temperature: float
) -> Tensor:
    """iBOT's patch loss: the cross-entropy of each masked patch's
    ``log softmax(student / student_temperature)`` against its ``targets`` (rows in
    mask order), averaged over the masked patches of each image, then over all the
    images of ``masks`` ``[B, N]`` (an image with no masked patch counts as 0)."""
    per_patch = -(targets * F.log_softmax(student_scores / student_temperature, dim=1)).sum(1)
    counts = masks.sum(dim=1)
    weights = (1.0 / counts.clamp(min=1).to(per_patch.dtype)).repeat_interleave(
        counts, output_size=len(per_patch)
    )
    return (per_patch * weights).sum() / len(masks)


class MaskedDistillationLoss(nn.Module):
    """The loss of DINOv2 (and iBOT with ``centering="centering"``, ``koleo_weight=0``).

    Reads the student's ``scores`` (every view), ``patch_scores`` (masked patches),
    ``patch_masks`` and ``view_features``, the teacher's ``teacher_scores`` (global
    views) and ``teacher_patch_scores``, and ``teacher_temperature`` (the
    ``dino_centering`` hook); with ``centering`` also ``teacher_center`` and
    ``teacher_patch_center`` (the ``dino_centering`` and ``patch_centering`` hooks).

    ``class_weight * L_cls + patch_weight * L_patch + koleo_weight * L_koleo``:
    ``L_cls`` is DINO's loss, the mean over the pairs of a global view ``g`` and
    another view ``v`` of the cross-entropy of the student's ``v`` against the
    teacher's ``g`` targets; ``L_patch`` is :func:`masked_patch_loss` over the global
    views; ``L_koleo`` is :func:`koleo` summed over the global views' class tokens.
    Sinkhorn-Knopp targets (``sinkhorn_iterations``, epsilon the teacher temperature)
    are solved over the teacher's class scores of all global views of the global batch,
    and separately over the masked patches of all ranks. No gradient reaches the
    teacher. It runs in float32 (float64 stays float64) with autocast off.
    """

    def __init__(
        self,
        student_temperature: float,
        *,
        centering: Centering = "sinkhorn_knopp",
        sinkhorn_iterations: int = 3,
        class_weight: float = 1.0,
        patch_weight: float = 1.0,
        koleo_weight: float = 0.1,
    ) -> None:
        super().__init__()
        if student_temperature <= 0:
            raise ValueError(f"student_temperature must be positive, got {student_temperature}")
        if centering not in ("sinkhorn_knopp", "centering"):
            raise ValueError(f"centering must be sinkhorn_knopp or centering: {centering!r}")
        self.student_temperature = student_temperature
        self.centering = centering
        self.sinkhorn_iterations = sinkhorn_iterations
        self.class_weight = class_weight
        self.patch_weight = patch_weight
        self.koleo_weight = koleo_weight

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        needed = ["teacher_scores", "teacher_patch_scores", "teacher_temperature"]
        if self.centering == "centering":
            needed += ["teacher_center", "teacher_patch_center"]
        missing = [key for key in needed if key not in output]
        if missing:
            raise KeyError(
                f"the iBOT/DINOv2 loss needs output{missing}: the momentum_teacher, "
                "dino_centering and patch_centering hooks write them (loss.name dinov2 and "
                "ibot add them to the default hooks)"
            )
        student = output["scores"]
        with torch.autocast(device_type=student[0].device.type, enabled=False):
            temperature = float(output["teacher_temperature"])
            teachers = [at_least_float32(view.detach()) for view in output["teacher_scores"]]
            global_views = len(teachers)
            class_targets = self.class_targets(teachers, output, temperature)
            patch_targets = self.patch_targets(
                at_least_float32(output["teacher_patch_scores"].detach()), output, temperature
            )
            log_probs = [
                F.log_softmax(at_least_float32(view) / self.student_temperature, dim=1)
                for view in student
            ]
            pairs = [
                -(target * log_prob).sum(dim=1).mean()
                for g, target in enumerate(class_targets)
                for v, log_prob in enumerate(log_probs)
                if v != g
            ]
            if not pairs:
                raise ValueError("iBOT and DINOv2 need at least 2 views")
            loss = self.class_weight * torch.stack(pairs).mean()
            patch = masked_patch_loss(
                at_least_float32(output["patch_scores"]),
                patch_targets,
                output["patch_masks"],
                self.student_temperature,
            )
            loss = loss + self.patch_weight * patch
            if self.koleo_weight:
                features = output["view_features"][:global_views]
                koleo_sum = sum(koleo(at_least_float32(view)) for view in features)
                loss = loss + self.koleo_weight * koleo_sum
        return loss

    def class_targets(self, teachers: list[Tensor], output: dict, temperature: float) -> list:
        """The targets of the teacher's class scores, one ``[B, K]`` per global view."""
        if self.centering == "centering":
            center = at_least_float32(output["teacher_center"])
            return [teacher_targets(view, center, temperature) for view in teachers]
        codes = sinkhorn(torch.cat(teachers), temperature, self.sinkhorn_iterations)
        return list(codes.split([len(view) for view in teachers]))

    def patch_targets(self, teacher: Tensor, output: dict, temperature: float) -> Tensor:
        """The targets ``[M, K']`` of the teacher's scores at the masked patches."""
        if self.centering == "centering":
            center = at_least_float32(output["teacher_patch_center"])
            return teacher_targets(teacher, center, temperature)
        # The ranks mask different numbers of patches: count them all, without a host read.
        rows = torch.tensor(float(len(teacher)), dtype=teacher.dtype, device=teacher.device)
        rows = distributed.all_reduce_sum(rows)
        return sinkhorn(teacher, temperature, self.sinkhorn_iterations, global_rows=rows)

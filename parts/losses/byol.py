"""The BYOL loss: online predictions regressed onto the target network's projections."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class ByolLoss(nn.Module):
    """Symmetric ``2 - 2 cos`` between ``output["predictions"]`` (online predictor,
    per view ``[B, D]``) and ``output["teacher_embeddings"]`` (target projections).

    For every ordered pair of different views ``(a, b)``: the mean over the batch of
    ``2 - 2 cos(prediction_a, target_b)``, i.e. the squared distance of the
    L2-normalised vectors; the loss is the mean over the pairs. No gradient reaches
    the targets. It runs in float32 with autocast off.
    """

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        if "teacher_embeddings" not in output:
            raise KeyError(
                "ByolLoss needs output['teacher_embeddings']: the momentum_teacher hook "
                "writes them (loss.name byol adds it to the default hooks)"
            )
        predictions = output["predictions"]
        with torch.autocast(device_type=predictions[0].device.type, enabled=False):
            online = [F.normalize(at_least_float32(p), dim=1) for p in predictions]
            targets = [
                F.normalize(at_least_float32(t.detach()), dim=1)
                for t in output["teacher_embeddings"]
            ]
            losses = [
                (2 - 2 * (p * t).sum(dim=1)).mean()
                for a, p in enumerate(online)
                for b, t in enumerate(targets)
                if a != b
            ]
        if not losses:
            raise ValueError("BYOL needs at least 2 views with targets")
        return torch.stack(losses).mean()

"""The classification loss of linear evaluation."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class ClassificationLoss(nn.Module):
    """Cross-entropy of ``output["logits"]`` ``[B, C]`` against ``batch["label"]`` ``[B]``,
    in float32."""

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The mean cross-entropy over the batch."""
        return F.cross_entropy(at_least_float32(output["logits"]), batch["label"])

"""The classification loss of linear evaluation and fine-tuning."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class ClassificationLoss(nn.Module):
    """Cross-entropy of ``output["logits"]`` ``[B, C]`` against ``batch["label"]`` ``[B]``,
    in float32.

    With ``label_smoothing`` ``e`` the target of a sample is ``1 - e + e / C`` on its label
    and ``e / C`` on every other class: the loss is ``(1 - e) * CE + e * mean_c(-log p_c)``.
    """

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = label_smoothing

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The mean cross-entropy over the batch's labelled samples: those labelled -100
        (the padding of a sharded test split) are left out; 0 for a batch of padding."""
        labels = batch["label"]
        total = F.cross_entropy(
            at_least_float32(output["logits"]),
            labels,
            label_smoothing=self.label_smoothing,
            reduction="sum",
        )
        return total / (labels != -100).sum().clamp(min=1)

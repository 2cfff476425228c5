"""The I-JEPA loss: the predictor's output against the target encoder's layer-normalised
patch tokens of the target blocks."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from hookbus.parts.losses.precision import at_least_float32

IjepaDistance = Literal["smooth_l1", "l2"]
"""``smooth_l1``: the authors' code; ``l2``: the paper's equation."""


def target_tokens(teacher_tokens: Tensor, target_keep: Tensor) -> Tensor:
    """The targets ``[B, M, Kt, D]``: the target encoder's patch tokens ``[B, N, D]``,
    layer-normalised over the features (no scale or shift), at the patches of each of
    the ``M`` target blocks ``target_keep`` ``[B, M, Kt]``."""
    normalised = F.layer_norm(teacher_tokens, (teacher_tokens.shape[-1],))
    batch, blocks, count = target_keep.shape
    index = target_keep.reshape(batch, blocks * count, 1).expand(-1, -1, normalised.shape[-1])
    return torch.gather(normalised, 1, index).reshape(batch, blocks, count, -1)


class IjepaLoss(nn.Module):
    """The distance between ``output["predictions"]`` ``[B, M, Kt, D]`` (the predictor's
    tokens for the ``M`` target blocks) and :func:`target_tokens` of
    ``output["teacher_embeddings"][0]`` (the target encoder's patch tokens of the whole
    view, ``[B, N, D]``) at ``batch["target_keep"]``.

    ``smooth_l1`` (the authors' code): ``F.smooth_l1_loss`` (beta 1) averaged over every
    value of every target token. ``l2`` (the paper's equation):
    ``1/M sum_i sum_{j in B_i} ||s_hat_j - s_j||^2`` per image, averaged over the images.
    No gradient reaches the targets. It runs in float32 with autocast off.
    """

    def __init__(self, distance: IjepaDistance = "smooth_l1") -> None:
        super().__init__()
        if distance not in ("smooth_l1", "l2"):
            raise ValueError(f"distance must be smooth_l1 or l2, not {distance!r}")
        self.distance = distance

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` and the batch's target blocks."""
        prediction = output["predictions"]
        with torch.autocast(device_type=prediction.device.type, enabled=False):
            prediction = at_least_float32(prediction)
            teacher = at_least_float32(output["teacher_embeddings"][0].detach())
            target = target_tokens(teacher, batch["target_keep"])
            if self.distance == "smooth_l1":
                return F.smooth_l1_loss(prediction, target)
            blocks = prediction.shape[1]
            return (prediction - target).square().sum(dim=(1, 2, 3)).mean() / blocks

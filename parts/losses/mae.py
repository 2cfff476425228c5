"""The MAE loss: mean squared error of the predicted pixels on the masked patches only."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class MaeLoss(nn.Module):
    """Squared error between ``output["reconstruction"]`` and ``output["target_patches"]``
    (both ``[B, N, P]``: ``P`` pixel values per patch), averaged over the pixels of a
    patch, then over the masked patches (``output["mask"]`` ``[B, N]``, 1.0 masked): the
    visible patches do not count.

    With ``norm_pix_loss`` each target patch is first normalised by its own pixels:
    ``(t - mean(t)) / sqrt(var(t) + eps)``, the variance with Bessel's correction
    (divided by ``P - 1``), so a patch needs at least 2 values. No gradient reaches the
    target. It runs in float32 with autocast off.
    """

    def __init__(self, norm_pix_loss: bool = True, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm_pix_loss = norm_pix_loss
        self.eps = eps

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        prediction = output["reconstruction"]
        with torch.autocast(device_type=prediction.device.type, enabled=False):
            prediction = at_least_float32(prediction)
            target = at_least_float32(output["target_patches"].detach())
            mask = output["mask"].to(prediction.dtype)
            if self.norm_pix_loss:
                if target.shape[-1] < 2:
                    raise ValueError(
                        "norm_pix_loss needs patches of at least 2 pixel values (the patch "
                        "is 1x1 with one channel): set loss.mae.norm_pix_loss=false"
                    )
                mean = target.mean(dim=-1, keepdim=True)
                var = target.var(dim=-1, keepdim=True)
                target = (target - mean) / torch.sqrt(var + self.eps)
            per_patch = (prediction - target).square().mean(dim=-1)
            return (per_patch * mask).sum() / mask.sum()

"""LayerScale for the blocks of torchvision's ViT: a learned per-channel scale on each
residual branch, and how an export folds it into the branch's last linear layer."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hookbus.parts.models.drop_path import DropPathBlock

BRANCH_OUTPUTS = {"layer_scale_1": "self_attention.out_proj", "layer_scale_2": "mlp.3"}
"""Each scale of a :class:`LayerScaleBlock` and the linear layer that ends its branch
(torchvision's key prefixes within the block)."""


class LayerScaleBlock(DropPathBlock):
    """A :class:`~hookbus.parts.models.drop_path.DropPathBlock` whose attention and MLP
    branches are multiplied, channel by channel, by learned vectors ``layer_scale_1`` and
    ``layer_scale_2`` (``[width]``, both starting at ``init``) before each joins the
    residual stream: ``x + scale * branch(x)``. Small values start every block close to
    the identity. The other weights and keys are those of torchvision's ``EncoderBlock``;
    the two scales are extra keys of the block (and, being vectors, get no weight decay
    where biases and norms get none).
    """

    def __init__(
        self, num_heads: int, hidden_dim: int, mlp_dim: int, rate: float, init: float
    ) -> None:
        super().__init__(num_heads, hidden_dim, mlp_dim, rate)
        if not init > 0:
            raise ValueError(f"the LayerScale init must be above 0, got {init}")
        self.layer_scale_1 = nn.Parameter(torch.full((hidden_dim,), float(init)))
        self.layer_scale_2 = nn.Parameter(torch.full((hidden_dim,), float(init)))

    def attention_branch(self, input: Tensor) -> Tensor:
        """The attention branch, scaled by ``layer_scale_1``."""
        return super().attention_branch(input) * self.layer_scale_1

    def mlp_branch(self, x: Tensor) -> Tensor:
        """The MLP branch, scaled by ``layer_scale_2``."""
        return super().mlp_branch(x) * self.layer_scale_2


def fold_layer_scale(weights: dict[str, Tensor]) -> int:
    """Fold every LayerScale of ``weights`` (a ViT's state dict) into the linear layer
    that ends its branch, in place; returns how many scales were folded.

    ``scale * (W x + b) = (scale[:, None] * W) x + scale * b``: each ``...layer_scale_1``
    multiplies the rows of the attention's ``self_attention.out_proj`` weight and its
    bias, each ``...layer_scale_2`` those of the MLP's last Linear ``mlp.3``, and the scale
    keys are removed. The blocks then compute what they did (up to float rounding) with
    the keys of torchvision's ``EncoderBlock`` alone.
    """
    scales = [key for key in weights if key.rsplit(".", 1)[-1] in BRANCH_OUTPUTS]
    for key in scales:
        block, name = key.rsplit(".", 1)
        layer = f"{block}.{BRANCH_OUTPUTS[name]}" if block else BRANCH_OUTPUTS[name]
        scale = weights.pop(key)
        weights[f"{layer}.weight"] = weights[f"{layer}.weight"] * scale[:, None]
        weights[f"{layer}.bias"] = weights[f"{layer}.bias"] * scale
    return len(scales)

"""Heads put on top of the backbone features: MLPs and prototypes."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

OutputBatchNorm = Literal["none", "affine", "no_affine"]
"""BatchNorm on an MLP's output: none, with a learned scale and shift (NNCLR's projector),
or without them (SimSiam's projector, MoCo v3's projectors and ViT predictor)."""

Activation = Literal["relu", "gelu"]
"""The activation after each hidden layer of an MLP: ReLU (SimCLR's and most heads'), or
GELU (the heads of DINO, iBOT, DINOv2 and DINOv3 in their authors' code)."""


class MLPHead(nn.Module):
    """Linear layers between consecutive ``dims``; each hidden layer is followed by
    BatchNorm1d (when ``batch_norm``) and the ``activation`` (ReLU, or GELU: DINO's
    head), the last layer is a plain Linear.

    With ``output_batch_norm`` other than ``"none"`` the last Linear (without bias: the
    BatchNorm's mean removes it) is followed by a BatchNorm1d, with (``"affine"``) or
    without (``"no_affine"``) a learned scale and shift, and no activation. It serves as
    projection head (SimCLR, MoCo, BYOL, SwAV, DINO, Barlow Twins, MoCo v3, SimSiam,
    NNCLR) and as prediction head (BYOL, MoCo v3, SimSiam, NNCLR).

    With ``hidden_bias`` false the hidden Linear layers have no bias, as the MoCo v3,
    SimSiam and VISSL NNCLR code (before a BatchNorm a bias changes nothing in the
    forward pass, but it is a parameter the optimizer decays and checkpoints carry);
    ``ValueError`` when there is no hidden layer for it to apply to."""

    def __init__(
        self,
        dims: list[int],
        batch_norm: bool,
        output_batch_norm: OutputBatchNorm = "none",
        hidden_bias: bool = True,
        activation: Activation = "relu",
    ) -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be relu or gelu, got {activation!r}")
        if len(dims) < 2:
            raise ValueError(f"MLPHead needs at least an input and an output size, got {dims}")
        if output_batch_norm not in ("none", "affine", "no_affine"):
            raise ValueError(
                f"output_batch_norm must be none, affine or no_affine, got {output_batch_norm!r}"
            )
        if not hidden_bias and len(dims) < 3:
            raise ValueError(f"hidden_bias false needs a hidden layer, but the MLP {dims} has none")
        layers: list[nn.Module] = []
        last = len(dims) - 2
        for index, (size_in, size_out) in enumerate(pairwise(dims)):
            if index < last:
                layers.append(nn.Linear(size_in, size_out, bias=hidden_bias))
                if batch_norm:
                    layers.append(nn.BatchNorm1d(size_out))
                layers.append(nn.ReLU(inplace=True) if activation == "relu" else nn.GELU())
            elif output_batch_norm == "none":
                layers.append(nn.Linear(size_in, size_out))
            else:
                layers.append(nn.Linear(size_in, size_out, bias=False))
                layers.append(nn.BatchNorm1d(size_out, affine=output_batch_norm == "affine"))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: Tensor) -> Tensor:
        """Project ``[B, dims[0]]`` to ``[B, dims[-1]]``."""
        return self.layers(features)


class Prototypes(nn.Module):
    """Scores of L2-normalised embeddings against ``count`` prototype vectors.

    ``forward(x) = normalize(x) @ weight.T`` with ``weight`` ``[count, dim]`` (no bias).
    With ``weight_norm`` the forward uses the rows of ``weight`` L2-normalised: DINO's
    weight-normalised last layer with its norm fixed to 1, so every score is a cosine.
    Without it the rows are used as they are; SwAV keeps them on the unit sphere with a
    hook that normalises them after every update.
    """

    def __init__(self, dim: int, count: int, weight_norm: bool = False) -> None:
        super().__init__()
        if count < 1:
            raise ValueError(f"Prototypes needs at least one prototype, got {count}")
        self.weight_norm = weight_norm
        self.weight = nn.Parameter(torch.empty(count, dim))
        nn.init.normal_(self.weight, std=dim**-0.5)
        with torch.no_grad():
            self.weight.copy_(F.normalize(self.weight, dim=1))

    def forward(self, embeddings: Tensor) -> Tensor:
        """Scores ``[B, count]`` of embeddings ``[B, dim]``."""
        weight = F.normalize(self.weight, dim=1) if self.weight_norm else self.weight
        return F.normalize(embeddings, dim=1) @ weight.T

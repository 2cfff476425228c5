"""The Barlow Twins loss: the cross-correlation of two views' embeddings made the identity."""

from __future__ import annotations

from itertools import combinations

import torch
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.precision import at_least_float32


class BarlowTwinsLoss(nn.Module):
    """Barlow Twins on ``output["embeddings"]`` (the projector's output, per view ``[B, D]``).

    Each view's embeddings go through a BatchNorm without affine parameters, with the
    batch's statistics (mean and biased variance, ``eps``), as the method's BatchNorm on
    the projector output does in training. For two views the cross-correlation is
    ``C = z_a.T @ z_b / N`` (``[D, D]``) and the loss
    ``sum_i (1 - C_ii)^2 + lambd * sum_{i != j} C_ij^2``; with more views, the mean
    over the pairs. When distributed, the embeddings of all ranks are gathered (with
    gradients) so that statistics and ``C`` are over the global batch. It runs in
    float32 with autocast off.
    """

    def __init__(self, lambd: float, eps: float = 1e-5) -> None:
        super().__init__()
        if lambd < 0 or eps <= 0:
            raise ValueError(f"lambd must be >= 0 and eps > 0, got {lambd} and {eps}")
        self.lambd = lambd
        self.eps = eps

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = output["embeddings"]
        if len(views) < 2:
            raise ValueError(f"Barlow Twins needs at least 2 views, got {len(views)}")
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            gather = distributed.all_gather_cat_with_gradient
            normalised = [self._batch_norm(gather(at_least_float32(view))) for view in views]
            losses = [self._pair_loss(a, b) for a, b in combinations(normalised, 2)]
        return torch.stack(losses).mean()

    def _batch_norm(self, view: Tensor) -> Tensor:
        mean = view.mean(dim=0)
        variance = view.var(dim=0, unbiased=False)
        return (view - mean) / torch.sqrt(variance + self.eps)

    def _pair_loss(self, first: Tensor, second: Tensor) -> Tensor:
        correlation = first.T @ second / len(first)
        diagonal = torch.diagonal(correlation)
        on_diagonal = (1 - diagonal).pow(2).sum()
        off_diagonal = correlation.pow(2).sum() - diagonal.pow(2).sum()
        return on_diagonal + self.lambd * off_diagonal

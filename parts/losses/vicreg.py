"""The VICReg loss: invariance, variance and covariance terms on two views' embeddings."""

from __future__ import annotations

from itertools import combinations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.precision import at_least_float32


class VicregLoss(nn.Module):
    """VICReg on ``output["embeddings"]`` (the expander's output, per view ``[B, D]``).

    For two views ``z_a``, ``z_b`` the loss is
    ``sim_coeff * s + std_coeff * (v(z_a) + v(z_b)) / 2 + cov_coeff * (c(z_a) + c(z_b))``
    (the authors' released code), where

    - ``s`` (invariance) is the mean squared difference of ``z_a`` and ``z_b`` over the
      batch and the dimensions;
    - ``v(z)`` (variance) is the mean over dimensions of ``relu(gamma - sqrt(Var(z_j) + eps))``,
      ``Var`` the unbiased variance over the batch, ``gamma`` 1;
    - ``c(z)`` (covariance) is the sum of the squared off-diagonal entries of the
      covariance matrix ``(z - mean).T @ (z - mean) / (N - 1)``, divided by ``D``.

    When distributed, each view is gathered from every rank (with gradients) before the
    variance and covariance terms, so they are over the global batch; the invariance
    term stays on the rank's own rows (the mean of the ranks' terms is the global one).
    With more than two views the loss is the mean of the two-view loss over all pairs
    of views; each view's variance and covariance terms are computed once, and enter
    that mean with weight ``1 / views`` and ``2 / views``. It runs in float32 with
    autocast off.

    The variance terms of the two branches are averaged, as in the authors' training
    code, with which the published weights 25 / 25 / 1 were tuned; the paper's equation 6
    sums them, which ``std_coeff=50`` reproduces.
    """

    def __init__(
        self,
        sim_coeff: float = 25.0,
        std_coeff: float = 25.0,
        cov_coeff: float = 1.0,
        gamma: float = 1.0,
        eps: float = 1e-4,
    ) -> None:
        super().__init__()
        if min(sim_coeff, std_coeff, cov_coeff) < 0 or gamma <= 0 or eps <= 0:
            raise ValueError(
                "coefficients must be >= 0, gamma and eps > 0, got "
                f"{sim_coeff}, {std_coeff}, {cov_coeff}, {gamma}, {eps}"
            )
        self.sim_coeff = sim_coeff
        self.std_coeff = std_coeff
        self.cov_coeff = cov_coeff
        self.gamma = gamma
        self.eps = eps

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = output["embeddings"]
        if len(views) < 2:
            raise ValueError(f"VICReg needs at least 2 views, got {len(views)}")
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            local = [at_least_float32(view) for view in views]
            invariance = torch.stack([F.mse_loss(a, b) for a, b in combinations(local, 2)])
            gathered = [distributed.all_gather_cat_with_gradient(view) for view in local]
            variance = torch.stack([self._variance(view) for view in gathered])
            covariance = torch.stack([self._covariance(view) for view in gathered])
        # Over pairs, the mean of (v_a + v_b) / 2 is the mean over views of v, and the
        # mean of c_a + c_b is twice the mean over views of c.
        return (
            self.sim_coeff * invariance.mean()
            + self.std_coeff * variance.mean()
            + self.cov_coeff * 2 * covariance.mean()
        )

    def _variance(self, view: Tensor) -> Tensor:
        std = torch.sqrt(view.var(dim=0) + self.eps)
        return F.relu(self.gamma - std).mean()

    def _covariance(self, view: Tensor) -> Tensor:
        if len(view) < 2:
            raise ValueError("VICReg's covariance needs at least 2 samples in the batch")
        centred = view - view.mean(dim=0)
        covariance = centred.T @ centred / (len(view) - 1)
        off_diagonal = covariance.pow(2).sum() - torch.diagonal(covariance).pow(2).sum()
        return off_diagonal / view.shape[1]

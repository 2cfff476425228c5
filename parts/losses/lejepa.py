"""The LeJEPA loss: SIGReg, a sliced Epps-Pulley test of the projections against an
isotropic Gaussian, and the prediction of every view from its image's global views."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.distributed import nn as distributed_nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.precision import at_least_float32


def directions(dim: int, slices: int, seed: int) -> Tensor:
    """``slices`` random unit directions ``[dim, slices]`` (float32, on the CPU): the
    columns of a standard normal draw from a generator seeded with ``seed``, each
    divided by its norm."""
    draw = torch.randn(dim, slices, generator=torch.Generator().manual_seed(seed))
    return draw / draw.norm(dim=0)


def sigreg(projections: Tensor, unit_directions: Tensor, knots: int, t_max: float) -> Tensor:
    """SIGReg of ``projections`` ``[V, N, D]`` along ``unit_directions`` ``[D, S]``.

    Each view's ``N`` rows are projected on each direction; at the frequencies
    ``t_k = linspace(0, t_max, knots)`` the empirical characteristic function
    ``(mean cos(t x), mean sin(t x))`` is compared with the standard normal's
    ``(exp(-t^2 / 2), 0)``; the squared error, weighted by ``exp(-t^2 / 2)`` and
    integrated by the trapezoidal rule over ``[-t_max, t_max]`` (the error is even in
    ``t``: twice the rule on ``[0, t_max]``), times ``N``, is the Epps-Pulley statistic;
    SIGReg is its mean over views and directions. When distributed the means are over
    the global batch (the sums of cos and sin all-reduced with their gradients: each
    rank's gradient is then that of the global statistic times the number of ranks,
    which DDP's average divides back) and ``N`` is the global batch's size.
    """
    t = torch.linspace(0, t_max, knots, dtype=projections.dtype, device=projections.device)
    step = t_max / (knots - 1)
    window = torch.exp(-t.square() / 2)
    trapezoid = torch.full_like(t, 2 * step)
    trapezoid[[0, -1]] = step
    angles = (projections @ unit_directions.to(projections)).unsqueeze(-1) * t  # [V, N, S, K]
    cos_sum, sin_sum = angles.cos().sum(dim=1), angles.sin().sum(dim=1)
    rows = projections.new_tensor(float(projections.shape[1]))
    if distributed.is_distributed():
        rows = distributed.all_reduce_sum(rows)
        cos_sum = distributed_nn.all_reduce(cos_sum)
        sin_sum = distributed_nn.all_reduce(sin_sum)
    error = (cos_sum / rows - window).square() + (sin_sum / rows).square()
    return ((error @ (trapezoid * window)) * rows).mean()


class LejepaLoss(nn.Module):
    """LeJEPA on ``output["embeddings"]`` (the projector's output, per view ``[B, D]``,
    the ``global_views`` global views first).

    ``sigreg_weight * SIGReg + (1 - sigreg_weight) * prediction``: SIGReg
    (:func:`sigreg`) of every view's projections, and the prediction term, the mean
    over views, rows and dimensions of the squared difference between a view's
    projection and the mean of its image's global views' projections.

    The directions are drawn anew each call (:func:`directions`) from a seed drawn
    from torch's global generator, whose state every checkpoint carries and which the
    ranks keep in step, so every rank projects on the same directions and a resumed run
    draws those of the run it continues. It runs in float32 (float64 stays float64)
    with autocast off. The prediction term is each rank's mean over its rows, which
    DDP's gradient average makes the global batch's.
    """

    def __init__(
        self,
        sigreg_weight: float = 0.05,
        global_views: int = 2,
        slices: int = 1024,
        knots: int = 17,
        t_max: float = 3.0,
    ) -> None:
        super().__init__()
        if not 0 <= sigreg_weight <= 1 or global_views < 1 or slices < 1 or knots < 2:
            raise ValueError(
                "sigreg_weight must be in [0, 1], global_views and slices at least 1, "
                f"knots at least 2: got {sigreg_weight}, {global_views}, {slices}, {knots}"
            )
        if t_max <= 0:
            raise ValueError(f"t_max must be above 0, got {t_max}")
        self.sigreg_weight = sigreg_weight
        self.global_views = global_views
        self.slices = slices
        self.knots = knots
        self.t_max = t_max

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = output["embeddings"]
        if len(views) < max(2, self.global_views):
            raise ValueError(
                f"LeJEPA needs {max(2, self.global_views)} views or more "
                f"({self.global_views} global), got {len(views)}"
            )
        seed = int(torch.randint(0, 2**62, (1,)))
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            projections = torch.stack([at_least_float32(view) for view in views])
            centers = projections[: self.global_views].mean(dim=0)
            prediction = (centers - projections).square().mean()
            unit = directions(projections.shape[-1], self.slices, seed)
            regulariser = sigreg(projections, unit, self.knots, self.t_max)
        return self.sigreg_weight * regulariser + (1 - self.sigreg_weight) * prediction

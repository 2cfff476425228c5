"""Linear probes on cached features: a learning-rate x weight-decay grid chosen on a
held-out part of train, and the low-shot splits (a fraction of the train labels, several
draws)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.engine.process.threads import one_torch_thread


@dataclass(frozen=True)
class ProbeSettings:
    """How a probe is trained: a linear layer on the standardised features (each L2
    normalised, then centred and scaled by the train features' mean and standard
    deviation), from zero weights, by SGD with ``momentum`` on mini-batches of
    ``batch_size`` in a seeded order, for ``epochs`` epochs (at least one step each), the
    learning rate on a cosine from its grid value to 0, the weight decay (an L2 term
    ``weight_decay / 2 * |W|^2`` on the weights, not the bias) from its grid. Every point
    of the grid ``lrs`` x ``weight_decays`` is trained at once on the same batches;
    ``held_out`` of each class's train images choose the point."""

    lrs: tuple[float, ...] = (0.01, 0.1, 1.0)
    weight_decays: tuple[float, ...] = (0.0, 1e-4, 1e-3)
    epochs: int = 100
    batch_size: int = 256
    momentum: float = 0.9
    held_out: float = 0.1

    def __post_init__(self) -> None:
        if not self.lrs or any(not (math.isfinite(lr) and lr > 0) for lr in self.lrs):
            raise ValueError(f"probe learning rates must be positive numbers: {self.lrs}")
        if not self.weight_decays or any(
            not (math.isfinite(wd) and wd >= 0) for wd in self.weight_decays
        ):
            raise ValueError(f"probe weight decays must be 0 or more: {self.weight_decays}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"probe epochs and batch size must be at least 1: {self.epochs}, {self.batch_size}"
            )
        if not 0 <= self.momentum < 1:
            raise ValueError(f"probe momentum must be in [0, 1): {self.momentum}")
        if not 0 < self.held_out < 1:
            raise ValueError(f"the held-out fraction must be in (0, 1): {self.held_out}")

    def grid(self) -> list[tuple[float, float]]:
        """The ``(lr, weight_decay)`` points, learning rates outer."""
        return [(lr, wd) for lr in self.lrs for wd in self.weight_decays]


def standardise(train: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """``train`` and ``others`` L2-normalised per row, then centred and scaled with the
    mean and standard deviation of the normalised ``train`` rows (a constant column is
    only centred): float64 on the CPU."""
    rows = [F.normalize(t.double().cpu(), dim=1) for t in (train, *others)]
    mean = rows[0].mean(dim=0)
    std = rows[0].std(dim=0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    return tuple((t - mean) / std for t in rows)


def train_probes(
    x: Tensor,
    y: Tensor,
    num_classes: int,
    grid: Sequence[tuple[float, float]],
    settings: ProbeSettings,
    seed: int,
) -> tuple[Tensor, Tensor]:
    """Weights ``[G, D, C]`` and biases ``[G, C]`` of one probe per ``(lr, weight_decay)``
    of ``grid``, trained on ``x`` ``[N, D]`` (already standardised) and labels ``y``
    ``[N]`` as :class:`ProbeSettings` says. The batches are drawn from a generator
    seeded with ``seed``, so the same arguments give the same probes. The probes are
    small matrix products: they run on one torch thread, which on busy cores is many
    times faster than a pool's."""
    x, y = x.float(), y.long()
    count, dims = x.shape
    probes = len(grid)
    lrs = torch.tensor([lr for lr, _ in grid]).view(1, 1, probes)
    decays = torch.tensor([wd for _, wd in grid]).view(1, 1, probes)
    # One matrix [D, C * G] for all probes, the classes before the probes: the softmax
    # then runs over a middle dimension, several times faster on the CPU than over a
    # last dimension as short as a class count.
    weights = torch.zeros(dims, num_classes, probes)
    bias = torch.zeros(num_classes, probes)
    velocity_w, velocity_b = torch.zeros_like(weights), torch.zeros_like(bias)
    batch = min(settings.batch_size, count)
    steps = settings.epochs * -(-count // batch)
    generator = torch.Generator().manual_seed(seed)
    onehot = F.one_hot(y, num_classes).float().unsqueeze(2)
    step = 0
    with one_torch_thread():
        for _ in range(settings.epochs):
            order = torch.randperm(count, generator=generator)
            for start in range(0, count, batch):
                chosen = order[start : start + batch]
                xb = x.index_select(0, chosen)
                logits = (xb @ weights.view(dims, -1)).view(-1, num_classes, probes) + bias
                # The gradient of the mean cross-entropy with respect to the logits.
                error = (logits.softmax(dim=1) - onehot.index_select(0, chosen)) / len(chosen)
                grad_w = (xb.T @ error.view(len(chosen), -1)).view_as(weights)
                velocity_w.mul_(settings.momentum).add_(grad_w + decays * weights)
                velocity_b.mul_(settings.momentum).add_(error.sum(dim=0))
                rate = lrs * (0.5 * (1 + math.cos(math.pi * step / steps)))
                weights -= rate * velocity_w
                bias -= rate[0] * velocity_b
                step += 1
    return weights.permute(2, 0, 1).contiguous(), bias.T.contiguous()


def train_probe_draws(
    xs: Tensor,
    ys: Tensor,
    num_classes: int,
    point: tuple[float, float],
    settings: ProbeSettings,
    seeds: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """Weights ``[R, D, C]`` and biases ``[R, C]`` of one probe at ``point`` (``(lr,
    weight_decay)``) per draw: probe ``r`` is :func:`train_probes`'s on ``xs[r]``
    ``[N, D]`` (standardised) and ``ys[r]`` ``[N]`` with the batch order of
    ``seeds[r]``, the same updates, up to the order of float sums. The draws (of equal
    size) are trained side by side in one loop of batched products: the low-shot
    probes' few images make steps so small that the loop's own cost is most of theirs."""
    xs, ys = xs.float(), ys.long()
    draws, count, dims = xs.shape
    lr, decay = point
    weights = torch.zeros(draws, dims, num_classes)
    bias = torch.zeros(draws, 1, num_classes)
    velocity_w, velocity_b = torch.zeros_like(weights), torch.zeros_like(bias)
    batch = min(settings.batch_size, count)
    steps = settings.epochs * -(-count // batch)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    onehot = F.one_hot(ys, num_classes).float()
    rows = torch.arange(draws).view(draws, 1)
    step = 0
    with one_torch_thread():
        for _ in range(settings.epochs):
            orders = torch.stack([torch.randperm(count, generator=g) for g in generators])
            for start in range(0, count, batch):
                chosen = orders[:, start : start + batch]
                xb = xs[rows, chosen]
                logits = torch.bmm(xb, weights) + bias
                error = (logits.softmax(dim=2) - onehot[rows, chosen]) / chosen.shape[1]
                grad_w = torch.bmm(xb.transpose(1, 2), error)
                velocity_w.mul_(settings.momentum).add_(grad_w + decay * weights)
                velocity_b.mul_(settings.momentum).add_(error.sum(dim=1, keepdim=True))
                rate = lr * (0.5 * (1 + math.cos(math.pi * step / steps)))
                weights -= rate * velocity_w
                bias -= rate * velocity_b
                step += 1
    return weights, bias.squeeze(1)


def probe_predictions(weights: Tensor, bias: Tensor, x: Tensor) -> Tensor:
    """The predicted classes ``[G, N]`` of each probe on ``x`` ``[N, D]``."""
    logits = torch.einsum("nd,gdc->gnc", x.float(), weights) + bias.unsqueeze(1)
    return logits.argmax(dim=2)


def stratified_part(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of a random ``fraction`` of each class's items (rounded, at least
    one), drawn without replacement from ``rng``."""
    chosen = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        take = min(len(members), max(1, round(fraction * len(members))))
        chosen.append(rng.choice(members, take, replace=False))
    return np.sort(np.concatenate(chosen))


@dataclass(frozen=True)
class GridPoint:
    """One ``(lr, weight_decay)`` of the grid and its held-out top-1."""

    lr: float
    weight_decay: float
    held_out_top1: float


@dataclass(frozen=True)
class LinearResult:
    """The probe's test top-1 at the grid point chosen on the held-out images."""

    top1: float
    lr: float
    weight_decay: float
    grid: list[GridPoint] = field(default_factory=list)
    held_out_images: int = 0

    def to_json(self) -> dict:
        """The result as JSON-ready values."""
        return {
            "top1": self.top1,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "held_out_images": self.held_out_images,
            "grid": [vars(point) for point in self.grid],
        }


def linear_probe(
    train: tuple[Tensor, Tensor],
    test: tuple[Tensor, Tensor],
    settings: ProbeSettings,
    seed: int,
) -> LinearResult:
    """Test top-1 of the probe whose ``(lr, weight_decay)`` scores best on a held-out
    part of train (``settings.held_out`` of each class, seeded; the first point of the
    grid wins a tie), trained again with that point on all of train.

    ``train`` and ``test`` are ``(features [N, D], labels [N])`` with labels from 0; the
    number of classes is that of the train labels.
    """
    with one_torch_thread():  # small products and copies: see train_probes
        (train_x, train_y), (test_x, test_y) = train, test
        num_classes = int(train_y.max()) + 1
        labels = train_y.cpu().numpy()
        held = stratified_part(labels, settings.held_out, np.random.default_rng([seed, 1]))
        fit = np.setdiff1d(np.arange(len(labels)), held)
        grid = settings.grid()
        fit_x, held_x = standardise(train_x[fit], train_x[held])
        weights, bias = train_probes(fit_x, train_y[fit], num_classes, grid, settings, seed)
        held_y = train_y[held].cpu()
        scores = (probe_predictions(weights, bias, held_x) == held_y).double().mean(dim=1).tolist()
        best = int(np.argmax(scores))
        lr, wd = grid[best]
        all_x, test_std = standardise(train_x, test_x)
        weights, bias = train_probes(all_x, train_y, num_classes, [(lr, wd)], settings, seed)
        accuracy = float(
            (probe_predictions(weights, bias, test_std)[0] == test_y.cpu()).double().mean()
        )
        points = [GridPoint(lr, wd, score) for (lr, wd), score in zip(grid, scores, strict=True)]
    return LinearResult(accuracy, lr, wd, points, len(held))


@dataclass(frozen=True)
class LowShotResult:
    """Test top-1 of the probe trained on ``fraction`` of the train labels, per draw."""

    fraction: float
    images: list[int]
    top1: list[float]

    @property
    def mean(self) -> float:
        """Mean top-1 over the draws."""
        return float(np.mean(self.top1))

    @property
    def std(self) -> float:
        """Standard deviation of the draws' top-1 (0 for one draw)."""
        return float(np.std(self.top1))

    @property
    def spread(self) -> float:
        """Largest minus smallest top-1 of the draws."""
        return float(max(self.top1) - min(self.top1))

    def to_json(self) -> dict:
        """The result as JSON-ready values."""
        return {
            "fraction": self.fraction,
            "draws": len(self.top1),
            "images": self.images,
            "top1": self.top1,
            "mean": self.mean,
            "std": self.std,
            "spread": self.spread,
        }


def low_shot_indices(labels: Tensor, fraction: float, seed: int, draw: int) -> np.ndarray:
    """The train indices of draw ``draw``: ``fraction`` of each class (rounded, at least
    one image), drawn with a generator seeded by ``(seed, fraction, draw)``: the same
    arguments give the same images."""
    rng = np.random.default_rng([seed, round(fraction * 1_000_000), draw])
    return stratified_part(labels.cpu().numpy(), fraction, rng)


def low_shot(
    train: tuple[Tensor, Tensor],
    test: tuple[Tensor, Tensor],
    fraction: float,
    draws: int,
    point: tuple[float, float],
    settings: ProbeSettings,
    seed: int,
) -> LowShotResult:
    """Test top-1 of the probe at ``point`` (``(lr, weight_decay)``, the linear probe's
    choice) trained on each of ``draws`` draws of :func:`low_shot_indices` (batch order
    seeded ``seed + draw``; the draws side by side, :func:`train_probe_draws`); features
    are standardised with the drawn images' statistics."""
    with one_torch_thread():  # small products and copies: see train_probes
        (train_x, train_y), (test_x, test_y) = train, test
        num_classes = int(train_y.max()) + 1
        chosen = [
            torch.from_numpy(low_shot_indices(train_y, fraction, seed, d)) for d in range(draws)
        ]
        standardised = [standardise(train_x[indices], test_x) for indices in chosen]
        weights, bias = train_probe_draws(
            torch.stack([fit_x for fit_x, _ in standardised]),
            torch.stack([train_y[indices] for indices in chosen]),
            num_classes,
            point,
            settings,
            [seed + draw for draw in range(draws)],
        )
        scores = []
        for draw, (_, test_std) in enumerate(standardised):
            predicted = probe_predictions(
                weights[draw : draw + 1], bias[draw : draw + 1], test_std
            )[0]
            scores.append(float((predicted == test_y.cpu()).double().mean()))
        sizes = [len(indices) for indices in chosen]
    return LowShotResult(fraction, sizes, scores)

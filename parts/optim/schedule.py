"""The learning-rate schedule (linear warm-up, then cosine decay or a constant rate) and
the weight-decay schedule (constant, or a cosine to ``weight_decay_end``)."""

from __future__ import annotations

import math

import torch

from hookbus.engine.config import OptimizerConfig


def learning_rate(cfg: OptimizerConfig, iteration: int, iterations_per_epoch: int) -> float:
    """The learning rate of train step ``iteration`` (0-based, counted over the run).

    Warm-up lasts ``round(warmup_epochs * iterations_per_epoch)`` steps, rising
    linearly as ``lr * (iteration + 1) / warmup_steps`` to reach ``lr`` on its last
    step. After it the rate is ``lr`` (``schedule="constant"``) or follows a half
    cosine from ``lr`` to ``final_lr``, reached at ``num_epochs * iterations_per_epoch``
    and kept after.
    """
    warmup_steps = round(cfg.warmup_epochs * iterations_per_epoch)
    if iteration < warmup_steps:
        return cfg.lr * (iteration + 1) / warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    total_steps = cfg.num_epochs * iterations_per_epoch
    progress = min(1.0, (iteration - warmup_steps) / max(1, total_steps - warmup_steps))
    return cfg.final_lr + (cfg.lr - cfg.final_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group of ``optimizer``: ``lr`` times the
    group's ``lr_scale`` (1 when it has none; see
    :func:`hookbus.parts.optim.parameter_groups`), or the group's ``fixed_lr`` where it
    has one (the groups of ``optimizer.fixed_lr_for``)."""
    for group in optimizer.param_groups:
        fixed = group.get("fixed_lr")
        group["lr"] = fixed if fixed is not None else lr * group.get("lr_scale", 1.0)


def weight_decay(cfg: OptimizerConfig, iteration: int, iterations_per_epoch: int) -> float:
    """The weight decay of train step ``iteration`` (0-based, counted over the run):
    ``weight_decay``, or with ``weight_decay_end`` a half cosine from ``weight_decay``
    to ``weight_decay_end``, reached at ``num_epochs * iterations_per_epoch`` and kept
    after (DINO's, without warm-up)."""
    if cfg.weight_decay_end is None:
        return cfg.weight_decay
    progress = min(1.0, iteration / max(1, cfg.num_epochs * iterations_per_epoch))
    start, end = cfg.weight_decay, cfg.weight_decay_end
    return end + (start - end) * 0.5 * (1 + math.cos(math.pi * progress))


def set_weight_decay(optimizer: torch.optim.Optimizer, value: float) -> None:
    """Set the weight decay of the decayed parameter groups of ``optimizer`` (those
    :func:`hookbus.parts.optim.parameter_groups` marks ``decayed``) to ``value``; the
    others keep none."""
    for group in optimizer.param_groups:
        if group.get("decayed"):
            group["weight_decay"] = value

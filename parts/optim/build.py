"""Build the optimizer of a run from its config."""

from __future__ import annotations

import torch
from torch import nn

from hookbus.engine.config import Config
from hookbus.parts.optim.lars import LARS


def parameter_groups(model: nn.Module, weight_decay: float, adapt: bool = False) -> list[dict]:
    """Trainable parameters in two groups: matrices and kernels (``ndim > 1``) with
    ``weight_decay``, and biases and normalisation weights (``ndim <= 1``) without.
    With ``adapt`` (for :class:`hookbus.parts.optim.LARS`) the groups also say whether the
    trust ratio applies: to the first group only. Empty groups are left out."""
    trainable = [param for param in model.parameters() if param.requires_grad]
    groups = [
        {"params": [p for p in trainable if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.ndim <= 1], "weight_decay": 0.0},
    ]
    if adapt:
        groups[0]["adapt"], groups[1]["adapt"] = True, False
    return [group for group in groups if group["params"]]


def build_optimizer(cfg: Config, model: nn.Module) -> torch.optim.Optimizer:
    """AdamW, SGD or LARS (``optimizer.name``) over ``model``'s trainable parameters.

    The learning rate starts at ``optimizer.lr``; the train step sets it every
    iteration from :func:`hookbus.parts.optim.learning_rate`.
    """
    opt = cfg.optimizer
    if opt.name == "lars":
        return LARS(
            parameter_groups(model, opt.weight_decay, adapt=True),
            lr=opt.lr,
            momentum=opt.momentum,
            trust_coefficient=opt.trust_coefficient,
        )
    groups = parameter_groups(model, opt.weight_decay)
    if opt.name == "adamw":
        return torch.optim.AdamW(groups, lr=opt.lr)
    if opt.name == "sgd":
        return torch.optim.SGD(groups, lr=opt.lr, momentum=opt.momentum)
    raise ValueError(f"optimizer.name {opt.name!r} is not one of 'adamw', 'sgd', 'lars'")

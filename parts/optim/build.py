"""Build the optimizer of a run from its config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from hookbus.parts.config import Config
from hookbus.parts.optim.lars import LARS


@runtime_checkable
class ScaledParameters(Protocol):
    """A model that sets learning-rate multipliers and weight-decay exemptions of its
    own parameters (:class:`hookbus.parts.models.fine_tune.FineTuneModel`)."""

    def lr_scales(self) -> dict[str, float]:
        """The learning-rate multiplier of each parameter, by name (1 when left out)."""
        ...

    def no_weight_decay(self) -> set[str]:
        """Names of matrices kept out of weight decay (class tokens, position embeddings)."""
        ...


def parameter_groups(
    model: nn.Module,
    weight_decay: float,
    adapt: bool = False,
    exclude_bias_and_norm: bool = True,
    fixed_lr_for: Sequence[str] = (),
    fixed_lr: float = 0.0,
) -> list[dict]:
    """Trainable parameters in groups: matrices and kernels (``ndim > 1``) with
    ``weight_decay``, biases and normalisation weights (``ndim <= 1``) without, unless
    ``exclude_bias_and_norm`` is false (then every parameter is decayed, as SimSiam's
    and MoCo v3's ViT code); with ``adapt`` (for :class:`hookbus.parts.optim.LARS`) the
    groups also say whether the trust ratio applies: to the decayed ones only. Empty
    groups are left out.

    Each group has an ``lr_scale``, the multiple of the scheduled learning rate it
    learns at (:func:`hookbus.parts.optim.set_learning_rate`): 1, unless ``model`` is
    :class:`ScaledParameters`, whose multipliers split the groups further (one group per
    weight decay and multiplier, decayed groups first, then by rising multiplier) and
    whose :meth:`~ScaledParameters.no_weight_decay` matrices join the groups without it.
    The parameters of the modules named in ``fixed_lr_for`` (``"predictor"`` is
    ``model.predictor``; ``"head.layers"`` a submodule) form groups of their own, after
    the others, with ``fixed_lr``: the learning rate they keep while the schedule moves
    the rest (SimSiam's predictor). A name that matches no trainable parameter is a
    ``ValueError``. Decayed groups say so (``decayed``), for
    :func:`hookbus.parts.optim.set_weight_decay`.
    """
    scales, exempt = {}, set()
    if isinstance(model, ScaledParameters):
        scales, exempt = model.lr_scales(), model.no_weight_decay()
    matched = dict.fromkeys(fixed_lr_for, False)
    groups: dict[tuple[bool, bool, float], dict] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        decayed = (param.ndim > 1 or not exclude_bias_and_norm) and name not in exempt
        scale = scales.get(name, 1.0)
        fixed = False
        for prefix in fixed_lr_for:
            if name == prefix or name.startswith(prefix + "."):
                matched[prefix] = fixed = True
        group = groups.setdefault(
            (fixed, decayed, scale),
            {"params": [], "weight_decay": weight_decay if decayed else 0.0, "lr_scale": scale},
        )
        if decayed:
            group["decayed"] = True
        if fixed:
            group["fixed_lr"] = fixed_lr * scale
        if adapt:
            group["adapt"] = decayed
        group["params"].append(param)
    missing = [prefix for prefix, found in matched.items() if not found]
    if missing:
        parts = sorted({name.split(".")[0] for name, _ in model.named_parameters()})
        raise ValueError(
            f"optimizer.fixed_lr_for: {', '.join(map(repr, missing))} names no trainable "
            f"parameter of the model; its parts are {', '.join(parts)}"
        )
    return [groups[key] for key in sorted(groups, key=lambda key: (key[0], not key[1], key[2]))]


def build_optimizer(cfg: Config, model: nn.Module) -> torch.optim.Optimizer:
    """AdamW, SGD or LARS (``optimizer.name``) over ``model``'s trainable parameters.

    The learning rate starts at ``optimizer.lr`` (times each group's ``lr_scale``, see
    :func:`parameter_groups`); the train step sets it every iteration from
    :func:`hookbus.parts.optim.learning_rate`, except in the groups of
    ``optimizer.fixed_lr_for``, which keep ``optimizer.lr`` throughout.
    """
    opt = cfg.optimizer
    groups = parameter_groups(
        model,
        opt.weight_decay,
        adapt=opt.name == "lars",
        exclude_bias_and_norm=opt.exclude_bias_and_norm_from_weight_decay,
        fixed_lr_for=opt.fixed_lr_for,
        fixed_lr=opt.lr,
    )
    for group in groups:
        group["lr"] = group.get("fixed_lr", opt.lr * group["lr_scale"])
    if opt.name == "lars":
        return LARS(
            groups, lr=opt.lr, momentum=opt.momentum, trust_coefficient=opt.trust_coefficient
        )
    if opt.name == "adamw":
        return torch.optim.AdamW(groups, lr=opt.lr, betas=opt.betas)
    if opt.name == "sgd":
        return torch.optim.SGD(groups, lr=opt.lr, momentum=opt.momentum)
    raise ValueError(f"optimizer.name {opt.name!r} is not one of 'adamw', 'sgd', 'lars'")

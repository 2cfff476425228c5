"""Build the loss of a run from its config; losses are chosen by name."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from engine.config import Config, LossConfig
from engine.losses.nt_xent import NTXentLoss
from engine.registry import Registry

LOSSES: Registry[Callable[[LossConfig], nn.Module]] = Registry("loss")
"""Builders ``(cfg.loss) -> loss module``, chosen by ``loss.name``. A loss module is
called as ``loss(output, batch)`` and returns a scalar tensor."""


@LOSSES.register("nt_xent")
def build_nt_xent(cfg: LossConfig) -> NTXentLoss:
    """:class:`NTXentLoss` at ``loss.temperature``."""
    return NTXentLoss(cfg.temperature)


def build_loss(cfg: Config) -> nn.Module:
    """The loss named by ``loss.name``."""
    return LOSSES.get(cfg.loss.name)(cfg.loss)

"""Optimizers and the learning-rate schedule."""

from __future__ import annotations

from hookbus.parts.optim.build import build_optimizer, parameter_groups
from hookbus.parts.optim.lars import LARS
from hookbus.parts.optim.schedule import (
    learning_rate,
    set_learning_rate,
    set_weight_decay,
    weight_decay,
)

__all__ = [
    "LARS",
    "build_optimizer",
    "learning_rate",
    "parameter_groups",
    "set_learning_rate",
    "set_weight_decay",
    "weight_decay",
]

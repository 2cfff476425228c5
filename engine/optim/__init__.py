"""Optimizers and the learning-rate schedule."""

from __future__ import annotations

from engine.optim.build import build_optimizer, parameter_groups
from engine.optim.lars import LARS
from engine.optim.schedule import learning_rate, set_learning_rate

__all__ = ["LARS", "build_optimizer", "learning_rate", "parameter_groups", "set_learning_rate"]

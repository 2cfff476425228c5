"""Train steps: a registry and the standard step."""

from __future__ import annotations

from hookbus.steps.registry import TRAIN_STEPS, TrainStep, get_train_step, register_train_step
from hookbus.steps.standard import move_to_device, standard_train_step

__all__ = [
    "TRAIN_STEPS",
    "TrainStep",
    "get_train_step",
    "move_to_device",
    "register_train_step",
    "standard_train_step",
]

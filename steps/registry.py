"""The train-step registry: recipes choose a step by ``trainer.train_step_name``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.registry import Registry

TrainStep = Callable[[RunEngine, Any], Any]
"""A train step: ``step(engine, batch)`` runs one batch and fires the inner events."""

TRAIN_STEPS: Registry[TrainStep] = Registry("train step")


def register_train_step(name: str) -> Callable[[TrainStep], TrainStep]:
    """Decorator registering a train step under ``name``.

    Example::

        @register_train_step("my_step")
        def my_step(engine, batch):
            ...
    """
    return TRAIN_STEPS.register(name)


def get_train_step(name: str) -> TrainStep:
    """The train step registered as ``name``."""
    return TRAIN_STEPS.get(name)

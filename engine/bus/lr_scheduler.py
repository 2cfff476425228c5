"""Finding an ignite learning-rate scheduler among an engine's handlers.

When one is attached (a ``ParamScheduler`` such as ``CosineAnnealingScheduler`` or
``LRScheduler``, or a ``ParamGroupScheduler``, on ``"lr"``), it drives the learning
rate and the standard train step steps aside: it reads the rate the scheduler set
instead of setting the config's schedule (``optimizer.warmup_epochs`` and cosine).
"""

from __future__ import annotations

from typing import Any

from ignite.engine import Engine
from ignite.handlers.param_scheduler import BaseParamScheduler, ParamGroupScheduler


def _schedules_lr(handler: Any) -> bool:
    if isinstance(handler, ParamGroupScheduler):
        return any(_schedules_lr(scheduler) for scheduler in handler.schedulers)
    return isinstance(handler, BaseParamScheduler) and handler.param_name == "lr"


def lr_scheduler_name(engine: Engine) -> str | None:
    """The class name of the learning-rate scheduler attached to ``engine``, or None."""
    for handlers in engine._event_handlers.values():
        for stored, _, _ in handlers:
            parent = getattr(stored, "_parent", None)
            handler = parent() if parent is not None else stored
            if _schedules_lr(handler):
                return type(handler).__name__
    return None

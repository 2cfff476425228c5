"""hookbus: self-supervised learning for images on an event-driven hook bus.

The public API, importable from here::

    from hookbus import SSLTrainer, Hook, SSLEvents, Priority, load_config, default_hooks
    from hookbus import FakeEngine, RunEngine, RunState, register_hook, register_train_step
    from hookbus import embed_images, save_embeddings
    from hookbus import evaluate, write_report
    from hookbus import train, TrainedRun, Composed   # and hookbus.compose.compose

The package is laid out in floors, each importing only from those below it (see
docs/concepts.md): ``hookbus.engine`` (the kernel: events, bus, hooks' base, run state,
config, registries, checkpoint files), ``hookbus.parts`` (data, models, losses, meters,
optimizers), ``hookbus.hooks`` and ``hookbus.steps``, and this package's own modules on
top (trainer, command line, launcher, export, reference pages).

The names below are loaded on first use, so that ``import hookbus.engine.errors`` (or
any other kernel module) does not pull in the trainer, the models or the data.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookbus.compose import Composed
    from hookbus.config import Config, load_config
    from hookbus.embed import Embeddings, embed_images, save_embeddings
    from hookbus.engine.bus.bus_engine import prepare_engine
    from hookbus.engine.bus.events import SSLEvents
    from hookbus.engine.bus.hook import Hook
    from hookbus.engine.bus.hook_registry import HOOKS, register_hook
    from hookbus.engine.bus.priorities import Priority
    from hookbus.engine.bus.run_engine import RunEngine
    from hookbus.engine.bus.state import RunState
    from hookbus.engine.bus.testing import FakeEngine
    from hookbus.engine.errors import CheckpointError, ConfigError, DataError, UserError
    from hookbus.eval import EvalSettings, Evaluation, evaluate
    from hookbus.hook_set import default_hooks, method_hook
    from hookbus.parts.data import DATASETS
    from hookbus.parts.losses import LOSSES
    from hookbus.parts.meters import METERS
    from hookbus.parts.models import BACKBONES
    from hookbus.report import write_report
    from hookbus.steps.registry import TRAIN_STEPS, register_train_step
    from hookbus.train_call import TrainedRun, train
    from hookbus.trainer import SSLTrainer

_PUBLIC: dict[str, str] = {
    "BACKBONES": "hookbus.parts.models",
    "CheckpointError": "hookbus.engine.errors",
    "Composed": "hookbus.compose",
    "Config": "hookbus.config",
    "ConfigError": "hookbus.engine.errors",
    "DATASETS": "hookbus.parts.data",
    "DataError": "hookbus.engine.errors",
    "Embeddings": "hookbus.embed",
    "EvalSettings": "hookbus.eval",
    "Evaluation": "hookbus.eval",
    "FakeEngine": "hookbus.engine.bus.testing",
    "HOOKS": "hookbus.engine.bus.hook_registry",
    "Hook": "hookbus.engine.bus.hook",
    "LOSSES": "hookbus.parts.losses",
    "METERS": "hookbus.parts.meters",
    "Priority": "hookbus.engine.bus.priorities",
    "RunEngine": "hookbus.engine.bus.run_engine",
    "RunState": "hookbus.engine.bus.state",
    "SSLEvents": "hookbus.engine.bus.events",
    "SSLTrainer": "hookbus.trainer",
    "TrainedRun": "hookbus.train_call",
    "TRAIN_STEPS": "hookbus.steps.registry",
    "UserError": "hookbus.engine.errors",
    "default_hooks": "hookbus.hook_set",
    "embed_images": "hookbus.embed",
    "evaluate": "hookbus.eval",
    "load_config": "hookbus.config",
    "method_hook": "hookbus.hook_set",
    "prepare_engine": "hookbus.engine.bus.bus_engine",
    "register_hook": "hookbus.engine.bus.hook_registry",
    "register_train_step": "hookbus.steps.registry",
    "save_embeddings": "hookbus.embed",
    "train": "hookbus.train_call",
    "write_report": "hookbus.report",
}
"""``{public name: the module that defines it}``."""

__all__ = [
    "BACKBONES",
    "DATASETS",
    "HOOKS",
    "LOSSES",
    "METERS",
    "TRAIN_STEPS",
    "CheckpointError",
    "Composed",
    "Config",
    "ConfigError",
    "DataError",
    "Embeddings",
    "EvalSettings",
    "Evaluation",
    "FakeEngine",
    "Hook",
    "Priority",
    "RunEngine",
    "RunState",
    "SSLEvents",
    "SSLTrainer",
    "TrainedRun",
    "UserError",
    "default_hooks",
    "embed_images",
    "evaluate",
    "load_config",
    "method_hook",
    "prepare_engine",
    "register_hook",
    "register_train_step",
    "save_embeddings",
    "train",
    "write_report",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'hookbus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])

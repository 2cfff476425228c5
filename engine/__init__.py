"""hookbus: self-supervised learning for images on an event-driven hook bus.

The public API: :class:`SSLEvents`, :class:`Hook`, :class:`SSLTrainer`, :class:`Config`,
:func:`load_config`; the test kit lives in :mod:`engine.testing`.
"""

from __future__ import annotations

from engine.config import Config
from engine.config_io import load_config
from engine.errors import CheckpointError, ConfigError, UserError
from engine.events import SSLEvents
from engine.hook import Hook
from engine.trainer import SSLTrainer

__all__ = [
    "CheckpointError",
    "Config",
    "ConfigError",
    "Hook",
    "SSLEvents",
    "SSLTrainer",
    "UserError",
    "load_config",
]

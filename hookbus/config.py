"""Reading a recipe into the whole config (:class:`hookbus.parts.config.Config`): YAML
loaded safely, dotted overrides, then validation with every shipped method's rules, whose
entries (``hookbus.methods``) this module imports so that they are registered."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookbus.engine.config import config_io
from hookbus.methods import METHOD_ENTRIES
from hookbus.parts.config import Config

__all__ = ["METHOD_ENTRIES", "Config", "load_config", "validate_config"]


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read the YAML recipe at ``path`` (None: all defaults), apply ``overrides``, validate.

    ``path`` is a file, or a shipped recipe's name (``simclr_digits``, as ``hookbus
    recipes`` lists them; a file at that path wins:
    :func:`hookbus.engine.config.recipe_names.resolve_recipe`). An override is
    ``dotted.key=value``; the value is read as a YAML scalar or flow collection
    (``optimizer.lr=0.3``, ``trainer.imports=[my.steps]``). Raises
    :class:`hookbus.engine.errors.ConfigError` naming the file, the override or the key path.
    """
    return config_io.load_config(path, overrides, schema=Config)


def validate_config(raw: dict[str, Any], source: str = "config") -> Config:
    """Validate a nested mapping into a :class:`Config`, or raise one clear ConfigError."""
    return config_io.validate_config(raw, source, schema=Config)

"""Importing the user modules a recipe names under ``trainer.imports``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from hookbus.engine.errors import ConfigError


def import_user_modules(names: Sequence[str]) -> None:
    """Import each module so that the steps, hooks and parts it registers become known.

    The current directory is searched too, as ``python -m`` would.
    """
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    for name in names:
        if (
            not name.strip()
            or name.startswith(".")
            or not all(part.isidentifier() for part in name.split("."))
        ):
            raise ConfigError(
                f"trainer.imports: {name!r} is not a module name (dotted, absolute: my.module)"
            )
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"trainer.imports: cannot import {name!r}: {exc}") from None
        except Exception as exc:  # the module's own code failed (a name registered twice...)
            problem = " ".join(str(exc).split())[:200]
            raise ConfigError(
                f"trainer.imports: importing {name!r} failed: {type(exc).__name__}: {problem}"
            ) from None

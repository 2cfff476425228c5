"""Importing the user modules a recipe names under ``trainer.imports``.

Nothing is imported from the working directory unless the user asks for it: a module
of ``trainer.imports`` is found on ``sys.path`` as Python set it up (the installed
packages, ``PYTHONPATH``), plus the folders of ``trainer.import_paths``, put at its front
only when given. A relative folder in a recipe is read from the recipe's folder, one in a
command-line override from the current directory (:func:`anchor_import_paths`, applied
when the recipe is loaded); a config built in Python is read from the current directory.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookbus.engine.errors import ConfigError


def anchor_import_paths(raw: dict[str, Any], base: Path) -> None:
    """Make the relative folders of ``trainer.import_paths`` in the nested mapping ``raw``
    absolute, read from ``base``. Entries of other types are left for validation to refuse."""
    trainer = raw.get("trainer")
    paths = trainer.get("import_paths") if isinstance(trainer, dict) else None
    if isinstance(trainer, dict) and isinstance(paths, list):
        trainer["import_paths"] = [
            str((base / path).resolve()) if isinstance(path, str) and path.strip() else path
            for path in paths
        ]


def import_user_modules(names: Sequence[str], paths: Sequence[str] = ()) -> None:
    """Put the folders ``paths`` at the front of ``sys.path`` (in their order, once each),
    then import each module of ``names`` so that the steps, hooks and parts it registers
    become known. Raises ConfigError naming a folder that is not one, or a module that
    cannot be imported."""
    folders = [_import_folder(path) for path in paths]
    for folder in reversed(folders):
        if folder not in sys.path:
            sys.path.insert(0, folder)
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
            hint = "" if folders else " (set trainer.import_paths or PYTHONPATH to its folder)"
            raise ConfigError(f"trainer.imports: cannot import {name!r}: {exc}{hint}") from None
        except Exception as exc:  # the module's own code failed (a name registered twice...)
            problem = " ".join(str(exc).split())[:200]
            raise ConfigError(
                f"trainer.imports: importing {name!r} failed: {type(exc).__name__}: {problem}"
            ) from None


def _import_folder(path: str) -> str:
    """The absolute form of one ``trainer.import_paths`` entry, which must be a folder."""
    folder = os.path.abspath(path) if path.strip() else ""
    if not folder or not os.path.isdir(folder):
        raise ConfigError(f"trainer.import_paths: {path!r} is not a folder")
    return folder

"""The shipped recipes by name, and what a RECIPE argument means: a file at that path, or
a shipped recipe's name.

The recipes install with the distribution as the package data of ``hookbus.recipes``
(the checkout's ``configs/``), so a recipe's name works wherever a path does, from any
working directory: ``hookbus train simclr_digits`` and ``load_config("simclr_digits")``.
A file at the path wins; otherwise the name (``simclr_digits`` or
``simclr_digits.yaml``) picks a shipped recipe; otherwise it is a user error naming the
closest recipe names. This module reads file names only (no YAML, no torch).
"""

from __future__ import annotations

import difflib
import errno
import os
from importlib.resources import files
from pathlib import Path

from hookbus.engine.errors import ConfigError

RECIPES_PACKAGE = "hookbus.recipes"
"""The package whose ``*.yaml`` files are the shipped recipes."""
SUFFIXES = (".yaml", ".yml")
LIST_HINT = "hookbus recipes lists them"


def recipes_dir() -> Path:
    """The folder the shipped recipes are installed in (``configs/`` in a checkout)."""
    return Path(str(files(RECIPES_PACKAGE)))


def recipe_paths() -> dict[str, Path]:
    """``{name: file}`` of every shipped recipe, sorted by name (the name is the stem)."""
    found = (path for path in recipes_dir().iterdir() if path.suffix in SUFFIXES)
    return {path.stem: path for path in sorted(found, key=lambda path: path.stem)}


def recipe_path(name: str) -> Path:
    """The file of the shipped recipe ``name`` (with or without ``.yaml``).

    Raises :class:`ConfigError` naming the closest recipe names when there is none.
    """
    paths = recipe_paths()
    stem = strip_suffix(name)
    if stem in paths:
        return paths[stem]
    raise ConfigError(f"no recipe named {name!r}; {suggest(stem, paths)}")


def resolve_recipe(argument: str) -> str:
    """The YAML file a RECIPE argument means.

    An existing file at ``argument`` wins; then a shipped recipe's name, with or without
    ``.yaml`` (a bare name only: ``configs/x.yaml`` is a path); else :class:`ConfigError`
    (exit status 2) with the closest recipe names. An existing directory that is not a
    recipe's name is returned as it is, for the config reader to report.
    """
    path = Path(argument)
    paths = recipe_paths()
    name = strip_suffix(argument) if path.name == argument else None
    if _exists(path) and not (path.is_dir() and name in paths):
        return argument
    if name in paths:
        return str(paths[name])
    if path.is_symlink():
        raise ConfigError(f"config file {argument} {_link_problem(path)}")
    raise ConfigError(
        f"config file not found: {argument!r} is neither a file nor a recipe name; "
        + suggest(strip_suffix(path.name), paths)
    )


def _exists(path: Path) -> bool:
    """Whether ``path`` leads to something (links followed); a path hookbus may not look
    at (a folder on the way without permission) is a :class:`ConfigError` naming it."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return False
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    return True


def _link_problem(path: Path) -> str:
    """What is wrong with the symbolic link ``path`` that leads to no file."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop: it leads nowhere"
        if not isinstance(exc, FileNotFoundError):
            return f"cannot be read: {exc.strerror or exc}"
    return f"is a broken symbolic link (to {os.readlink(path)})"


def strip_suffix(name: str) -> str:
    """``name`` without a ``.yaml`` or ``.yml`` ending."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def suggest(name: str, paths: dict[str, Path]) -> str:
    """The end of a message on an unknown recipe name: the closest names, or the list."""
    close = difflib.get_close_matches(name, list(paths), n=4, cutoff=0.6)
    if not close:
        return "hookbus recipes lists the recipe names"
    return f"did you mean {', '.join(close)}? ({LIST_HINT})"

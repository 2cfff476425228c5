"""The shipped recipes by name: list them, print one, and resolve a command's RECIPE argument.

The recipes install with the distribution as the package data of ``hookbus.recipes``
(the checkout's ``configs/``), so ``hookbus train simclr_digits`` runs from any working
directory. A command line's RECIPE is a path or a recipe's name: a file at that path
wins; otherwise the name (``simclr_digits`` or ``simclr_digits.yaml``) picks a shipped
recipe; otherwise it is a user error naming the closest recipe names.

This module reads YAML and nothing heavier (no torch), so ``hookbus recipes`` starts as
fast as ``hookbus --help``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from hookbus.engine.config import Config
from hookbus.engine.errors import ConfigError

RECIPES_PACKAGE = "hookbus.recipes"
"""The package whose ``*.yaml`` files are the shipped recipes."""
SUFFIXES = (".yaml", ".yml")
LIST_HINT = "hookbus recipes lists them"


@dataclass(frozen=True)
class RecipeSummary:
    """One line of ``hookbus recipes``: what a recipe trains, on what."""

    name: str
    method: str
    backbone: str
    data: str


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
    stem = _strip_suffix(name)
    if stem in paths:
        return paths[stem]
    raise ConfigError(f"no recipe named {name!r}; {_suggest(stem, paths)}")


def recipe_text(name: str) -> str:
    """The YAML text of the shipped recipe ``name``, exactly as it ships."""
    return recipe_path(name).read_text(encoding="utf-8")


def resolve_recipe(argument: str) -> str:
    """The YAML file a command line's RECIPE argument means.

    An existing file at ``argument`` wins; then a shipped recipe's name, with or without
    ``.yaml`` (a bare name only: ``configs/x.yaml`` is a path); else :class:`ConfigError`
    (exit status 2) with the closest recipe names. An existing directory that is not a
    recipe's name is returned as it is, for the config reader to report.
    """
    path = Path(argument)
    paths = recipe_paths()
    name = _strip_suffix(argument) if path.name == argument else None
    if path.exists() and not (path.is_dir() and name in paths):
        return argument
    if name in paths:
        return str(paths[name])
    raise ConfigError(
        f"config file not found: {argument!r} is neither a file nor a recipe name; "
        + _suggest(_strip_suffix(path.name), paths)
    )


def summarize(name: str, text: str) -> RecipeSummary:
    """What the recipe ``text`` trains: its loss (the method), backbone and data.

    A key the recipe leaves out shows the config's default, as a run would use it.
    """
    raw = yaml.safe_load(text)
    raw = raw if isinstance(raw, dict) else {}
    defaults = Config()
    loss = _section(raw, "loss")
    model = _section(raw, "model")
    backbone = _section(model, "backbone")
    data = _section(raw, "data")
    method = str(loss.get("name", defaults.loss.name))
    if _section(model, "linear_eval").get("enabled", defaults.model.linear_eval.enabled):
        method += " (linear eval)"
    if _section(model, "fine_tune").get("enabled", defaults.model.fine_tune.enabled):
        method += " (fine-tune)"
    backbone_text = str(backbone.get("name", defaults.model.backbone.name))
    if "width" in backbone:
        backbone_text += f", width {backbone['width']}"
    data_text = str(data.get("name", defaults.data.name))
    train_dir = _section(data, "folder").get("train_dir")
    if train_dir:
        data_text += f" ({train_dir})"
    return RecipeSummary(name, method, backbone_text, data_text)


def recipe_table() -> list[str]:
    """``hookbus recipes``: a header, then one aligned line per shipped recipe."""
    rows = [("recipe", "method (loss.name)", "backbone", "data")]
    for name, path in recipe_paths().items():
        summary = summarize(name, path.read_text(encoding="utf-8"))
        rows.append((summary.name, summary.method, summary.backbone, summary.data))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]


def _section(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}


def _strip_suffix(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _suggest(name: str, paths: dict[str, Path]) -> str:
    close = difflib.get_close_matches(name, list(paths), n=4, cutoff=0.6)
    if not close:
        return "hookbus recipes lists the recipe names"
    return f"did you mean {', '.join(close)}? ({LIST_HINT})"

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

from dataclasses import dataclass
from typing import Any

import yaml

from hookbus.config import Config
from hookbus.engine.config.recipe_names import (
    LIST_HINT,
    RECIPES_PACKAGE,
    SUFFIXES,
    recipe_path,
    recipe_paths,
    recipes_dir,
    resolve_recipe,
)

__all__ = [
    "LIST_HINT",
    "RECIPES_PACKAGE",
    "SUFFIXES",
    "RecipeSummary",
    "recipe_path",
    "recipe_paths",
    "recipe_table",
    "recipe_text",
    "recipes_dir",
    "resolve_recipe",
    "summarize",
]


@dataclass(frozen=True)
class RecipeSummary:
    """One line of ``hookbus recipes``: what a recipe trains, on what."""

    name: str
    method: str
    backbone: str
    data: str


def recipe_text(name: str) -> str:
    """The YAML text of the shipped recipe ``name``, exactly as it ships."""
    return recipe_path(name).read_text(encoding="utf-8")


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

"""Reading a config: YAML loaded safely, dotted overrides, validation with clear errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from hookbus.engine.bounded_files import read_text_bounded
from hookbus.engine.config import Config
from hookbus.engine.config.imports import anchor_import_paths
from hookbus.engine.config.recipe_names import resolve_recipe
from hookbus.engine.config.yaml_safety import MAX_BYTES, load_yaml
from hookbus.engine.errors import ConfigError

C = TypeVar("C", bound=Config)


def load_config(path: str | Path | None, overrides: Sequence[str] = (), *, schema: type[C]) -> C:
    """Read the YAML recipe at ``path`` (None: all defaults), apply ``overrides``, validate
    into ``schema`` (hookbus's: :func:`hookbus.config.load_config`).

    ``path`` is a file, or a shipped recipe's name (``simclr_digits``, as ``hookbus
    recipes`` lists them; a file at that path wins:
    :func:`hookbus.engine.config.recipe_names.resolve_recipe`). An override is
    ``dotted.key=value``; the value is read as a YAML scalar or flow collection
    (``optimizer.lr=0.3``, ``trainer.imports=[my.steps]``). Raises
    :class:`hookbus.engine.errors.ConfigError` naming the file, the override or the key path.
    """
    if path is not None and Path(path).name == str(path) and not Path(path).exists():
        path = resolve_recipe(str(path))  # a bare name: a shipped recipe's
    source = "defaults" if path is None else str(path)
    raw = {} if path is None else read_yaml(Path(path))
    if path is not None:
        anchor_import_paths(raw, Path(path).parent)
    for override in overrides:
        apply_override(raw, override)
    anchor_import_paths(raw, Path.cwd())
    return validate_config(raw, source, schema=schema)


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in a YAML file, loaded safely and within bounds
    (:func:`hookbus.engine.config.yaml_safety.load_yaml`). The file is checked before it is read
    (:mod:`hookbus.engine.bounded_files`): a FIFO, a device or a file over
    :data:`~hookbus.engine.config.yaml_safety.MAX_BYTES` is refused naming the limit."""
    text = read_text_bounded(path, "config file", MAX_BYTES, error=ConfigError)
    data = load_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Set ``dotted.key=value`` in the nested mapping ``raw``."""
    key, sep, text = override.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(part.strip() for part in parts):
        raise ConfigError(f"override {override!r} must look like section.key=value")
    value = load_yaml(text, f"override {_excerpt(override)}") if text.strip() else ""
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise ConfigError(f"override {override!r}: {where} is not a section")
        node = child
    node[parts[-1]] = value


def validate_config(raw: dict[str, Any], source: str = "config", *, schema: type[C]) -> C:
    """Validate a nested mapping into ``schema`` (a :class:`Config`), or raise one clear
    ConfigError."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        problems = [_describe(error, schema) for error in exc.errors()]
        raise ConfigError(f"invalid config ({source}): " + "; ".join(problems)) from None


def config_to_yaml(cfg: Config) -> str:
    """The effective config as YAML text (what a run writes into its directory)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def _describe(error: Mapping[str, Any], schema: type[BaseModel]) -> str:
    loc = [str(part) for part in error["loc"]]
    path = ".".join(loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(schema, loc[:-1])
        return f"unknown key {path!r}" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if error["type"] == "missing":
        return f"{path}: required key is missing"
    if error["type"] == "value_error" and isinstance(error.get("input"), dict):
        # A check across a section's keys: the message names them; the input is the section
        # (the whole config for a check across sections, which has no path to add).
        message = error["msg"].removeprefix("Value error, ")
        return f"{path}: {message}" if loc else message
    return f"{path}: {error['msg']} (got {_excerpt(error.get('input'))})"


def _allowed_keys(schema: type[BaseModel], parents: list[str]) -> list[str]:
    model = schema
    for part in parents:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _excerpt(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error quotes a short excerpt."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

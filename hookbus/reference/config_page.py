"""The config reference page: every key of the pydantic schema, its type, default and meaning."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from hookbus.config import Config


def config_rows(
    model: type[BaseModel] = Config, prefix: str = ""
) -> list[tuple[str, str, str, str]]:
    """``(dotted key, type, default, description)`` for every leaf key of the config."""
    rows: list[tuple[str, str, str, str]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(config_rows(annotation, prefix=f"{key}."))
            continue
        default = field.get_default(call_default_factory=True)
        rows.append((key, _type_name(annotation), _default_text(default), field.description or ""))
    return rows


def undocumented_config_keys() -> list[str]:
    """The leaf keys whose field has no description."""
    return [key for key, _, _, description in config_rows() if not description]


def config_reference_markdown() -> str:
    """The config reference page (docs/configuration.md)."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from `engine/config/` by `make docs-reference`; a test fails when this page",
        "and the code differ. Every key has a default; a recipe sets what differs.",
        "Unknown keys are errors. Override any key on the command line as `section.key=value`.",
        "`hookbus schema` prints the same schema as JSON Schema, for editors",
        "([Editor support](guides/editor-support.md)).",
        "",
    ]
    section = None
    for key, type_name, default, description in config_rows():
        top = key.split(".")[0]
        if top != section:
            section = top
            lines += ["", f"## {section}", "", "| key | type | default | description |"]
            lines.append("|---|---|---|---|")
        lines.append(f"| `{key}` | {type_name} | `{default}` | {description} |")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    text = str(annotation) if text in {"Literal", "list", "tuple", "dict"} else text
    text = _ANNOTATED.sub(_bounds, text)
    text = _SECTION_MODULE.sub("hookbus.engine.config.", text)
    return text.replace("typing.", "").replace("pathlib.", "").replace("|", "or")


_SECTION_MODULE = re.compile(r"hookbus\.engine\.config\.\w+\.")
"""A section's module in ``engine/config/``: its name is shown from ``hookbus.engine.config``,
which exports every section."""
_ANNOTATED = re.compile(r"Annotated\[(\w+), FieldInfo\(.*?metadata=\[(.*?)\]\)\]")
_BOUND = re.compile(r"(Ge|Gt|Le|Lt)\((?:ge|gt|le|lt)=([^)]+)\)")
_SIGNS = {"Ge": ">=", "Gt": ">", "Le": "<=", "Lt": "<"}


def _bounds(match: re.Match[str]) -> str:
    """``Annotated[int, FieldInfo(... metadata=[Ge(ge=1), Le(le=5)])]`` as ``int >= 1, <= 5``."""
    limits = [f"{_SIGNS[kind]} {value}" for kind, value in _BOUND.findall(match.group(2))]
    return f"{match.group(1)} ({', '.join(limits)})" if limits else match.group(1)


def _default_text(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "{...}"
    return str(value).replace("|", "\\|")

"""The run-state reference page: every field of ``engine.state``, and the hooks reading it."""

from __future__ import annotations

import re

from hookbus.engine.state import RUN_STATE_FIELDS
from hookbus.reference.docstrings import find_table, prose
from hookbus.reference.hooks_page import hook_classes

_FIELD = re.compile(r"``(?:state\.)?([a-z_]+)")


def readers() -> dict[str, list[str]]:
    """``{field: names of the hooks whose docstring table says they read it}``."""
    found: dict[str, list[str]] = {name: [] for name in RUN_STATE_FIELDS}
    for hook_name, hook_class in sorted(hook_classes().items()):
        table = find_table(hook_class.__doc__)
        cells = " ".join(table.cells("reads")) if table is not None else ""
        for field in dict.fromkeys(_FIELD.findall(cells)):
            if field in found:
                found[field].append(hook_name)
    return found


def run_state_markdown() -> str:
    """The run-state page (docs/reference/run-state.md)."""
    read_by = readers()
    lines = [
        "# Run state",
        "",
        "Generated from `engine/state.py` (`RUN_STATE_FIELDS`) and the hooks' docstrings",
        "by `make docs-reference`. The trainer and `hookbus.engine.testing.FakeEngine` set every",
        "field on `engine.state` to its default before a run; hooks and train steps read",
        "and write them. *Read by* lists the hooks in `hooks/` whose docstring table names",
        "the field.",
        "",
        "| field | default | meaning | read by |",
        "|---|---|---|---|",
    ]
    for name, field in RUN_STATE_FIELDS.items():
        hooks = ", ".join(f"`{hook}`" for hook in read_by[name]) or "-"
        default = repr(field.default()).replace("|", "\\|")
        lines.append(f"| `{name}` | `{default}` | {prose(field.doc)} | {hooks} |")
    return "\n".join(lines) + "\n"

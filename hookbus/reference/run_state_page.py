"""The run-state reference page: every field of ``engine.state``, and the hooks reading it."""

from __future__ import annotations

import dataclasses
import re

from hookbus.engine.bus.state import IGNITE_FIELDS, RUN_STATE_FIELDS, RunState
from hookbus.reference.docstrings import find_table, prose, summary_line
from hookbus.reference.hooks_page import hook_classes

_FIELD = re.compile(r"``(?:state\.)?([a-z_]+)")


DERIVED: tuple[str, ...] = ("phase_loss", "phase_number", "train_phase_count")
"""The properties of :class:`RunState` computed from its fields."""


def readers() -> dict[str, list[str]]:
    """``{field: names of the hooks whose docstring table says they read it}``."""
    found: dict[str, list[str]] = {name: [] for name in [*RUN_STATE_FIELDS, *DERIVED]}
    for hook_name, hook_class in sorted(hook_classes().items()):
        table = find_table(hook_class.__doc__)
        cells = " ".join(table.cells("reads")) if table is not None else ""
        for name in dict.fromkeys(_FIELD.findall(cells)):
            if name in found:
                found[name].append(hook_name)
    return found


def _default(spec: dataclasses.Field) -> str:
    factory = spec.default_factory
    value = factory() if callable(factory) else spec.default
    return repr(value).replace("|", "\\|")


def run_state_markdown() -> str:
    """The run-state page (docs/reference/run-state.md)."""
    read_by = readers()
    lines = [
        "# Run state",
        "",
        "Generated from `engine/bus/state.py` (`RunFields`, `RunState`) and the hooks'",
        "docstrings by `make docs-reference`. `engine.state` is a `hookbus.RunState`:",
        "ignite's `State` with the fields below, each declared once with its type and",
        "default. The trainer and `hookbus.FakeEngine` start every run with these",
        "defaults; hooks and train steps read and write them. *Read by* lists the hooks in",
        "`hooks/` whose docstring table names the field. A field whose type has no None",
        "but whose default is `None` (`cfg`, `model`, ...) is set by the trainer before",
        "`on_start`: hooks and steps always see it set, and a checker types it so.",
        "",
        "| field | type | default | meaning | read by |",
        "|---|---|---|---|---|",
    ]
    for name, spec in RUN_STATE_FIELDS.items():
        hooks = ", ".join(f"`{hook}`" for hook in read_by[name]) or "-"
        kind = str(spec.type).replace("|", "or")
        meaning = prose(spec.metadata["doc"])
        lines.append(f"| `{name}` | {kind} | `{_default(spec)}` | {meaning} | {hooks} |")
    lines += [
        "",
        "## ignite's fields",
        "",
        "ignite's own `State` fields are on the run state too, and hold in a hookbus run:",
        "",
        "| field | meaning |",
        "|---|---|",
        *(f"| `{name}` | {meaning} |" for name, meaning in IGNITE_FIELDS.items()),
    ]
    lines += [
        "",
        "## Derived values",
        "",
        "Properties of `RunState` computed from the fields, so that every hook reads the",
        "same value and it is computed once.",
        "",
        "| property | meaning | read by |",
        "|---|---|---|",
    ]
    for name in DERIVED:
        hooks = ", ".join(f"`{hook}`" for hook in read_by[name]) or "-"
        meaning = prose(summary_line(getattr(RunState, name).__doc__))
        lines.append(f"| `{name}` | {meaning} | {hooks} |")
    return "\n".join(lines) + "\n"

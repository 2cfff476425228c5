"""The hooks reference page: every hook of the ``hooks`` package, from its class docstring."""

from __future__ import annotations

import importlib
import pkgutil

import hookbus.hooks
from hookbus.config import Config
from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import HOOKS
from hookbus.engine.bus.priorities import priority_label
from hookbus.hook_set import default_hooks
from hookbus.reference.docstrings import find_table, prose, summary_line, to_markdown


def hook_classes() -> dict[str, type[Hook]]:
    """``{registered name: class}`` of every hook defined in the ``hooks`` package.

    Every module under ``hooks/`` (subpackages such as ``hooks/methods/`` included) is
    imported first, so a new hook module is picked up without being listed anywhere.
    Hooks registered from elsewhere (user modules, tests) are left out.
    """
    for module in pkgutil.walk_packages(hookbus.hooks.__path__, prefix="hookbus.hooks."):
        importlib.import_module(module.name)
    return {
        name: hook_class
        for name in HOOKS.names()
        if (hook_class := HOOKS.get(name)).__module__.startswith("hookbus.hooks.")
    }


def subscribed_events(hook_class: type[Hook]) -> list[SSLEvents]:
    """The events whose method ``hook_class`` defines (those :meth:`Hook.attach` registers)."""
    return [
        event
        for event in SSLEvents
        if getattr(hook_class, event.value) is not getattr(Hook, event.value)
    ]


def undocumented_hooks(classes: dict[str, type[Hook]] | None = None) -> list[str]:
    """The hooks whose class docstring has no table saying when they fire.

    A documented hook's docstring has a simple table with an ``event`` column (one row
    per event, then what it reads and writes) or a ``fires`` row (then ``reads`` and
    ``writes`` rows).
    """
    classes = hook_classes() if classes is None else classes
    missing = []
    for name, hook_class in sorted(classes.items()):
        table = find_table(hook_class.__doc__)
        if table is None or not (table.cells("event") or table.cells("fires")):
            missing.append(name)
    return missing


def hooks_markdown(classes: dict[str, type[Hook]] | None = None) -> str:
    """The hooks page (docs/reference/hooks.md)."""
    classes = hook_classes() if classes is None else classes
    default_names = {hook.name for hook in default_hooks(Config())}
    ordered = sorted(classes.items(), key=lambda item: (item[1].priority, item[0]))
    lines = [
        "# Hooks",
        "",
        "Generated from the class docstrings of the hooks in `hooks/` by",
        "`make docs-reference`. Lower priorities run first among an event's handlers.",
        '"Default" marks the hooks that `hookbus.default_hooks` attaches for a config',
        "with every default; the [hook plan](../quickstart.md#the-hook-plan) of a recipe",
        "shows exactly what runs. A recipe adds any hook below by its name under",
        "`hooks.extra`.",
        "",
        "Each example attaches its hook to the engine of a trainer made as below (the",
        "examples run in one Python session, in page order: `make doc-blocks`):",
        "",
        "```python",
        "from hookbus import SSLTrainer, load_config",
        "",
        'cfg = load_config("configs/simclr_digits.yaml", ["checkpoint.dir=runs/hooks_reference"])',
        "trainer = SSLTrainer(cfg)",
        "```",
        "",
        "| hook | priority | events | default | summary |",
        "|---|---|---|---|---|",
    ]
    for name, hook_class in ordered:
        events = ", ".join(f"`{event.value}`" for event in subscribed_events(hook_class))
        default = "yes" if name in default_names else "-"
        level = f"{priority_label(hook_class.priority)} ({hook_class.priority})"
        lines.append(
            f"| [`{name}`](#{name}) | {level} | {events} | {default} "
            f"| {prose(summary_line(hook_class.__doc__)).replace('|', '&#124;')} |"
        )
    for name, hook_class in ordered:
        lines += [
            "",
            f"## {name}",
            "",
            f"`{hook_class.__module__}.{hook_class.__qualname__}` · priority "
            f"{priority_label(hook_class.priority)} ({hook_class.priority})",
            "",
            _with_import(to_markdown(hook_class.__doc__), hook_class),
        ]
    return "\n".join(lines) + "\n"


def _with_import(markdown: str, hook_class: type[Hook]) -> str:
    """``markdown`` with the import of ``hook_class`` opening its first Python example."""
    name = hook_class.__qualname__
    if "```python\n" not in markdown or f"import {name}" in markdown:
        return markdown
    line = f"from {hook_class.__module__} import {name}"
    return markdown.replace("```python\n", f"```python\n{line}\n\n", 1)

"""Reference pages generated from the code, so that the docs never repeat it by hand.

``python -m hookbus.reference`` (``make docs-reference``) writes every page of
:data:`REFERENCE_PAGES`; ``tests/runner/test_reference.py`` fails when a page and the code
differ, and when a config key, event or hook is undocumented.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hookbus.reference.config_page import (
    config_reference_markdown,
    config_rows,
    undocumented_config_keys,
)
from hookbus.reference.events_page import events_markdown, undocumented_events
from hookbus.reference.hooks_page import hook_classes, hooks_markdown, undocumented_hooks
from hookbus.reference.run_state_page import run_state_markdown

REFERENCE_PAGES: dict[str, Callable[[], str]] = {
    "docs/configuration.md": config_reference_markdown,
    "docs/reference/events.md": events_markdown,
    "docs/reference/hooks.md": hooks_markdown,
    "docs/reference/run-state.md": run_state_markdown,
}
"""``{path from the repository root: function returning the page}``."""


def write_reference_pages(root: Path) -> list[Path]:
    """Write every reference page under ``root``; returns their paths."""
    written = []
    for relative, build in REFERENCE_PAGES.items():
        path = Path(root) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(build(), encoding="utf-8")
        written.append(path)
    return written


__all__ = [
    "REFERENCE_PAGES",
    "config_reference_markdown",
    "config_rows",
    "events_markdown",
    "hook_classes",
    "hooks_markdown",
    "run_state_markdown",
    "undocumented_config_keys",
    "undocumented_events",
    "undocumented_hooks",
    "write_reference_pages",
]

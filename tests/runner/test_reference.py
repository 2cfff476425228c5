"""Generated reference pages match the code, and nothing the code offers is undocumented."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hookbus import Hook
from hookbus.reference import (
    REFERENCE_PAGES,
    config_rows,
    hook_classes,
    hooks_markdown,
    undocumented_config_keys,
    undocumented_events,
    undocumented_hooks,
)
from hookbus.reference.docstrings import find_table, parse_simple_table, to_markdown

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("relative", sorted(REFERENCE_PAGES))
def test_generated_page_matches_the_code(relative: str) -> None:
    page = ROOT / relative
    assert page.is_file(), f"{relative} is missing: run `make docs-reference`"
    assert page.read_text() == REFERENCE_PAGES[relative](), (
        f"{relative} differs from the code: run `make docs-reference` and commit it"
    )


def test_every_config_key_has_a_description() -> None:
    assert undocumented_config_keys() == []


def test_every_event_is_described_in_the_events_docstring() -> None:
    assert undocumented_events() == []


def test_every_hook_has_a_docstring_table_of_when_it_fires() -> None:
    assert undocumented_hooks() == []


def test_every_module_under_hooks_is_imported_to_find_its_hooks() -> None:
    hook_classes()
    files = (ROOT / "hooks").rglob("*.py")
    modules = {
        ".".join(("hookbus", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for path in files
    }
    assert modules - set(sys.modules) == set()


def test_a_hook_without_a_table_is_reported() -> None:
    class Quiet(Hook):
        """Does something, but does not say what it reads."""

        def on_step(self, engine) -> None: ...

    class Untold(Hook):
        """Has a table, but not of events.

        ====  ====
        a     b
        ====  ====
        1     2
        ====  ====
        """

        def on_step(self, engine) -> None: ...

    class Told(Hook):
        """Says it.

        =========  =========  ======
        event      reads      writes
        =========  =========  ======
        on_step    iteration  --
        =========  =========  ======
        """

        def on_step(self, engine) -> None: ...

    classes = {"quiet": Quiet, "untold": Untold, "told": Told, "bare": Hook}
    assert undocumented_hooks(classes) == ["bare", "quiet", "untold"]


def test_hooks_page_lists_name_priority_and_events() -> None:
    class Marker(Hook):
        """Marks steps.

        ======  ===============
        fires   ``on_step``
        reads   ``iteration``
        writes  --
        ======  ===============
        """

        priority = 7

        def on_step(self, engine) -> None: ...

    page = hooks_markdown({"marker": Marker})
    assert "| [`marker`](#marker) | NORMAL+7 (7) | `on_step` | - | Marks steps. |" in page
    assert "- **reads**: ``iteration``" in page


def test_rows_name_nested_keys_with_their_defaults() -> None:
    rows = {key: (type_name, default) for key, type_name, default, _ in config_rows()}
    assert rows["optimizer.lr"] == ("float", "0.001")
    assert rows["model.amp.dtype"][1] == "bf16"
    assert rows["hooks.summary_plot.enabled"] == ("bool", "True")


def test_simple_table_rows_continue_on_a_blank_first_cell_or_a_trailing_comma() -> None:
    table = parse_simple_table(
        [
            "=========  =====  =====",
            "event      reads  does",
            "=========  =====  =====",
            "on_step    a,     x",
            "           b      y",
            "on_end,    --     z",
            "on_exc",
            "=========  =====  =====",
        ]
    )
    assert table.header == ["event", "reads", "does"]
    assert table.rows == [["on_step", "a, b", "x y"], ["on_end, on_exc", "--", "z"]]
    assert table.column("reads") == ["a, b", "--"]


def test_docstring_markdown_has_tables_code_blocks_and_escaped_tags() -> None:
    class Example:
        """Writes <phase>/loss with :class:`hookbus.Hook`.

        ======  =====
        a       b
        ======  =====
        ``x``   y|z
        ======  =====

        Example::

            Example().attach(engine)
        """

    markdown = to_markdown(Example.__doc__)
    assert markdown.split("\n\n") == [
        "Writes &lt;phase&gt;/loss with ``hookbus.Hook``.",
        "| a | b |\n|---|---|\n| ``x`` | y\\|z |",
        "Example:",
        "```python\nExample().attach(engine)\n```",
    ]
    assert find_table("no table here") is None

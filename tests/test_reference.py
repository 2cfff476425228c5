"""Generated reference pages match the code."""

from __future__ import annotations

from pathlib import Path

from engine.reference import config_reference_markdown, config_rows

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_page_matches_the_schema() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == config_reference_markdown(), "run `make docs-reference` and commit the page"


def test_every_config_key_has_a_description() -> None:
    assert [key for key, _, _, description in config_rows() if not description] == []


def test_rows_name_nested_keys_with_their_defaults() -> None:
    rows = {key: (type_name, default) for key, type_name, default, _ in config_rows()}
    assert rows["optimizer.lr"] == ("float", "0.001")
    assert rows["model.amp.dtype"][1] == "bf16"

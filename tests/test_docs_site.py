"""The MkDocs site: its nav names existing pages, and optional pages drop out until written."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

_spec = importlib.util.spec_from_file_location(
    "optional_pages", ROOT / "docs" / "site_hooks" / "optional_pages.py"
)
assert _spec is not None and _spec.loader is not None
optional_pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(optional_pages)


def nav_targets(nav: list) -> list[str]:
    targets = []
    for item in nav:
        target = next(iter(item.values())) if isinstance(item, dict) else item
        targets += nav_targets(target) if isinstance(target, list) else [target]
    return targets


def test_every_nav_page_exists_unless_it_is_optional() -> None:
    optional = set(SETTINGS["extra"]["optional_pages"])
    missing = [
        page
        for page in nav_targets(SETTINGS["nav"])
        if page not in optional and not (ROOT / "docs" / page).is_file()
    ]
    assert missing == []


def test_every_optional_page_has_a_nav_entry() -> None:
    assert set(SETTINGS["extra"]["optional_pages"]) <= set(nav_targets(SETTINGS["nav"]))


def test_pruning_drops_missing_optional_pages_and_emptied_sections(tmp_path: Path) -> None:
    (tmp_path / "here.md").write_text("# here")
    nav = [
        {"Home": "here.md"},
        {"Later": "later.md"},
        {"Section": [{"Also later": "later.md"}]},
        {"Required": "required.md"},
        "here.md",
    ]
    pruned = optional_pages.prune_nav(nav, {"later.md", "here.md"}, tmp_path)
    assert pruned == [{"Home": "here.md"}, {"Required": "required.md"}, "here.md"]


def test_tutorial_snippets_name_files_that_exist() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith('--8<-- "'):
                assert (ROOT / line.split('"')[1]).is_file(), f"{page}: {line}"

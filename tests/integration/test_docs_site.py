"""The MkDocs site: its nav names existing pages and every page is in the nav."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def nav_targets(nav: list) -> list[str]:
    targets = []
    for item in nav:
        target = next(iter(item.values())) if isinstance(item, dict) else item
        targets += nav_targets(target) if isinstance(target, list) else [target]
    return targets


def test_every_nav_page_exists() -> None:
    missing = [
        page for page in nav_targets(SETTINGS["nav"]) if not (ROOT / "docs" / page).is_file()
    ]
    assert missing == []


def test_every_page_is_in_the_nav() -> None:
    pages = {str(page.relative_to(ROOT / "docs")) for page in (ROOT / "docs").rglob("*.md")}
    assert pages - set(nav_targets(SETTINGS["nav"])) == set()


def test_tutorial_snippets_name_files_that_exist() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith('--8<-- "'):
                assert (ROOT / line.split('"')[1]).is_file(), f"{page}: {line}"

"""The kernel names no SSL method: no module of engine/ spells a method's loss name or
any word of its title, in code, comments or option descriptions; what differs between
methods lives in their entries (hookbus/methods/) and recipes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hookbus.methods import METHOD_ENTRIES

ENGINE = Path(__file__).parents[2] / "engine"

# Words of the titles that are plain English or shared by unrelated names.
COMMON_WORDS = {"v2", "v3", "twins"}


def method_words() -> set[str]:
    """Every shipped method's loss name, its title, and the title's distinctive words
    (``MoCo`` of ``MoCo v3``, ``JEPA`` of ``I-JEPA``), lower-cased."""
    words: set[str] = set()
    for spec in METHOD_ENTRIES:
        words |= {spec.name.lower(), spec.title.lower()}
        parts = re.split(r"[\s\-]+", spec.title.lower())
        words |= {part for part in parts if len(part) > 1 and part not in COMMON_WORDS}
    return words


def named_methods(text: str, words: set[str]) -> list[str]:
    """The method words ``text`` spells as whole words (case-insensitive)."""
    return sorted(
        {word for word in words if re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text.lower())}
    )


def test_the_words_cover_every_method_and_its_short_names() -> None:
    words = method_words()
    assert {"simclr", "moco_v3", "moco v3", "moco", "dinov2", "ijepa", "jepa"} <= words
    assert {"barlow", "barlow_twins", "mae", "ibot", "swav", "vicreg"} <= words


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("no weight decay (MoCo v3's ViT code)", ["moco", "moco v3"]),
        ("the DINO kNN vote", ["dino"]),
        ("I-JEPA's predictor", ["i-jepa", "jepa"]),
        ("a maestro, dinosaur or simclrish word", []),
    ],
)
def test_the_scan_finds_whole_words_only(text: str, found: list[str]) -> None:
    assert named_methods(text, method_words()) == found


def test_no_engine_module_names_a_method() -> None:
    words = method_words()
    named = {
        str(path.relative_to(ENGINE)): names
        for path in sorted(ENGINE.rglob("*.py"))
        if (names := named_methods(path.read_text(encoding="utf-8"), words))
    }
    assert len(list(ENGINE.rglob("*.py"))) > 30
    assert named == {}

"""The hook plan (``hookbus hooks RECIPE``) of every shipped recipe, as printed, against
the plans recorded in tests/data/hook_plans/ (one file per recipe).

The plans were recorded before ignite's handler lists took over the ordering from the
bus's own bookkeeping; a change to how handlers are placed must leave every plan as it was.
A deliberate change to a recipe's hooks records its plan again with
``HOOKBUS_RECORD_PLANS=1 pytest tests/runner/test_hook_plans_unchanged.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookbus.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "configs").glob("*.yaml"))
PLANS = ROOT / "tests" / "data" / "hook_plans"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.stem)
def test_the_printed_hook_plan_is_the_recorded_one(
    capsys: pytest.CaptureFixture[str], recipe: Path
) -> None:
    assert main(["hooks", str(recipe)]) == 0
    printed = capsys.readouterr().out
    recorded = PLANS / f"{recipe.stem}.txt"
    if os.environ.get("HOOKBUS_RECORD_PLANS") == "1":
        recorded.write_text(printed)
    assert printed == recorded.read_text()


def test_every_recorded_plan_is_of_a_shipped_recipe() -> None:
    assert sorted(path.stem for path in PLANS.glob("*.txt")) == [path.stem for path in RECIPES]

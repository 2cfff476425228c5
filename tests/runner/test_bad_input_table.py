"""The table of bad inputs (tests/bad_inputs.py): every one is refused by ``hookbus
validate`` with exit status 2 and one line naming the key or the file, quickly, and
``hookbus train`` refuses the named ones the same way without writing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bad_inputs import FILES, NAMED, BadInput, all_inputs, run_case

CASES = all_inputs()


def named_fast(cases: list[BadInput]) -> list[object]:
    """The cases found by hand run in make test-fast; the generated ones (a thousand) and
    the files (a deep nesting takes seconds) only in make test."""
    return [case if case in NAMED else pytest.param(case, marks=pytest.mark.slow) for case in cases]


def case_id(case: BadInput) -> str:
    text = " ".join(case.overrides) or f"file: {case.recipe!r}"
    return f"{case.kind}: {text}"[:80]


def test_the_table_holds_over_450_inputs() -> None:
    assert len(CASES) >= 450
    assert len({case_id(case) for case in CASES}) > 0.95 * len(CASES)


@pytest.mark.parametrize("case", named_fast(CASES), ids=case_id)
def test_validate_refuses_it_in_one_line(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert outcome.refused_cleanly(case), outcome
    assert outcome.error_lines[0].startswith("hookbus validate: error: ")
    assert outcome.seconds < 10


@pytest.mark.parametrize("case", named_fast([*NAMED, *FILES]), ids=case_id)
def test_train_refuses_it_and_writes_nothing(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path, command="train")
    assert outcome.refused_cleanly(case), outcome
    assert outcome.error_lines[0].startswith("hookbus train: error: ")

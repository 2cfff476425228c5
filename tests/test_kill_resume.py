"""SIGKILL a real training process at random moments; the resumed run is bit-identical."""

from __future__ import annotations

from pathlib import Path

from tests.kill_harness import kill_campaign


def test_killed_and_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    outcome = kill_campaign(tmp_path, kills=3, seed=1)
    assert outcome.kills == 3, outcome.notes
    assert outcome.identical_parameters
    assert outcome.identical_losses
    assert outcome.identical_iteration

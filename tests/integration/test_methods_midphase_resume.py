"""Each method stopped in the middle of a phase resumes bit-exactly (hook state included)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hookbus.engine.errors import PreemptedError
from tests.integration.test_methods_resume import METHODS, assert_equal_states, run
from tests.integration.test_preemption import SignalAt


@pytest.mark.parametrize("method", sorted(METHODS))
def test_method_preempted_mid_phase_resumes_to_the_straight_run(
    tmp_path: Path, method: str
) -> None:
    straight = run(tmp_path / "straight", method)
    with pytest.raises(PreemptedError, match=r"in phase 3/\d+ after step 1 "):
        # the signal arrives in train iteration 4, the first step of phase 2 (the second
        # train phase); the run checkpoints after that step, mid-phase, and stops
        run(tmp_path / "resumed", method, SignalAt(4, signal.SIGUSR1))
    resumed = run(tmp_path / "resumed", method)
    assert resumed.iteration == straight.iteration == 6
    assert_equal_states(straight.base_model.state_dict(), resumed.base_model.state_dict(), "model")
    hooks = {hook.name: hook.state_dict() for hook in straight.hooks if hook.has_state()}
    again = {hook.name: hook.state_dict() for hook in resumed.hooks if hook.has_state()}
    assert_equal_states(hooks, again, "hooks")

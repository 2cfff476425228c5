"""hookbus.stops: every way to ask for a stop read at one place, on a fake engine."""

from __future__ import annotations

import pytest

from hookbus import FakeEngine
from hookbus.engine.bus.phases import Phase, PhaseEnd
from hookbus.engine.errors import InterruptedRun, PreemptedError
from hookbus.engine.process.preemption import CTRL_C
from hookbus.stops import phase_end_at, stop_error, stop_line


def engine() -> FakeEngine:
    fake = FakeEngine(phases=[Phase("train", True, 4)])
    fake.begin_phase(0)
    return fake


def test_nothing_asked_goes_on() -> None:
    fake = engine()
    assert phase_end_at(fake) is None
    assert phase_end_at(fake, after_step=True) is None


def test_terminate_stops_between_phases_and_after_a_step() -> None:
    fake = engine()
    fake.terminate()
    assert phase_end_at(fake) is PhaseEnd.STOPPED
    assert phase_end_at(fake, after_step=True) is PhaseEnd.STOPPED
    assert fake.state.stopped_by is not None
    assert stop_line(fake.state).startswith(f"stopped early by {fake.state.stopped_by} in ")


@pytest.mark.parametrize(
    ("skip", "ended"), [(False, PhaseEnd.ENDED_EARLY), (True, PhaseEnd.ENDED_EARLY_QUIETLY)]
)
def test_terminate_epoch_ends_the_phase_after_a_step_only(skip: bool, ended: PhaseEnd) -> None:
    fake = engine()
    fake.terminate_epoch(skip_epoch_completed=skip)
    assert phase_end_at(fake) is None
    assert phase_end_at(fake, after_step=True) is ended


@pytest.mark.parametrize(
    ("signal", "error"),
    [("SIGTERM", PreemptedError), ("SIGUSR1", PreemptedError), (CTRL_C, InterruptedRun)],
)
def test_a_signal_preempts_after_a_step_only(signal: str, error: type) -> None:
    fake = engine()
    fake.state.stop_requested = signal
    assert phase_end_at(fake) is None
    assert phase_end_at(fake, after_step=True) is PhaseEnd.PREEMPTED
    raised = stop_error(fake.state)
    assert type(raised) is error
    assert str(raised).startswith(f"stopped by {signal} in ")
    assert str(raised).endswith("run the same command again to resume")

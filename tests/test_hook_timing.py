from __future__ import annotations

import pytest

from hookbus import HOOKS, FakeEngine, Priority, SSLEvents
from hookbus.hooks.timing import TimingHook
from tests.hook_stubs import Phase

PLAN = [Phase(train=True, length=4), Phase(train=False, length=2), Phase(train=True, length=4)]


def start_phase(engine: FakeEngine, idx: int) -> None:
    state = engine.state
    phase = state.phases[idx]
    state.phase_idx, state.train, state.phase_length = idx, phase.train, phase.length
    state.batches = 0
    state.batch_time, state.data_time = [], []
    engine.fire_event(SSLEvents.ON_PHASE_START)


def timed_step(engine: FakeEngine, batch_time: float, data_time: float = 0.0) -> None:
    engine.state.batch_time.append(batch_time)
    engine.state.data_time.append(data_time)
    engine.step()


def test_registered_with_priority() -> None:
    assert HOOKS.get("timing") is TimingHook
    assert TimingHook().priority == Priority.HIGH + 10
    assert TimingHook().name == "timing"


def test_eta_covers_rest_of_phase_and_later_phases() -> None:
    engine = FakeEngine(phases=PLAN)
    TimingHook().attach(engine)
    start_phase(engine, 0)
    timed_step(engine, 2.0)
    # 3 steps left here + 2 test + 4 train steps, tests priced at the train time for now
    assert engine.state.eta_seconds == pytest.approx(9 * 2.0)


def test_step_time_is_an_exponential_moving_average() -> None:
    engine = FakeEngine(phases=PLAN)
    TimingHook(smoothing=0.5).attach(engine)
    start_phase(engine, 0)
    timed_step(engine, 2.0)
    timed_step(engine, 4.0)
    # average 2 + 0.5 * (4 - 2) = 3; 2 + 2 + 4 steps left
    assert engine.state.eta_seconds == pytest.approx(8 * 3.0)


def test_train_and_test_steps_are_timed_apart() -> None:
    engine = FakeEngine(phases=PLAN)
    TimingHook().attach(engine)
    start_phase(engine, 0)
    for _ in range(4):
        timed_step(engine, 1.0)
    start_phase(engine, 1)
    timed_step(engine, 0.25)
    assert engine.state.eta_seconds == pytest.approx(1 * 0.25 + 4 * 1.0)


def test_data_wait_fraction_sums_over_the_phase_only() -> None:
    engine = FakeEngine(phases=PLAN)
    TimingHook().attach(engine)
    start_phase(engine, 0)
    timed_step(engine, 1.0, data_time=1.0)
    start_phase(engine, 1)
    timed_step(engine, 1.0, data_time=0.5)
    timed_step(engine, 3.0, data_time=0.5)
    assert engine.state.data_wait_fraction == pytest.approx(1.0 / 4.0)


def test_eta_is_zero_on_the_last_step() -> None:
    engine = FakeEngine(phases=PLAN)
    TimingHook().attach(engine)
    start_phase(engine, 2)
    for _ in range(4):
        timed_step(engine, 1.0)
    assert engine.state.eta_seconds == 0.0


def test_state_dict_restores_the_averages_after_resume() -> None:
    engine = FakeEngine(phases=PLAN)
    hook = TimingHook().attach(engine)
    start_phase(engine, 0)
    timed_step(engine, 2.0)
    start_phase(engine, 1)
    timed_step(engine, 0.5)
    saved = hook.state_dict()

    resumed = FakeEngine(phases=PLAN)
    restored = TimingHook()
    restored.load_state_dict(saved)
    restored.attach(resumed)
    start_phase(resumed, 1)
    timed_step(resumed, 0.5)
    assert restored.state_dict() == saved
    assert resumed.state.eta_seconds == pytest.approx(1 * 0.5 + 4 * 2.0)


def test_rejects_smoothing_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match="smoothing"):
        TimingHook(smoothing=0.0)

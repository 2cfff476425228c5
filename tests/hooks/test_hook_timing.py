from __future__ import annotations

import pytest

from hookbus import HOOKS, FakeEngine, Priority
from hookbus.engine.bus.phases import Phase
from hookbus.hooks.timing import TimingHook

PLAN = [Phase("train", True, 4), Phase("test", False, 2), Phase("train", True, 4)]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def start_phase(
    engine: FakeEngine,
    clock: Clock,
    idx: int,
    *,
    after: float = 0.0,
    batches_done: int | None = None,
) -> None:
    """Start phase ``idx`` ``after`` seconds after the last step."""
    clock.now += after
    engine.begin_phase(idx, batches_done=batches_done)


def timed_step(engine: FakeEngine, clock: Clock, seconds: float, data_time: float = 0.0) -> None:
    """A step that takes ``seconds`` of wall-clock time."""
    clock.now += seconds
    engine.step(batch_time=seconds, data_time=data_time)


def timed(plan: list[Phase] = PLAN) -> tuple[FakeEngine, Clock, TimingHook]:
    engine, clock = FakeEngine(phases=plan), Clock()
    hook = TimingHook(clock=clock).attach(engine)
    return engine, clock, hook


def test_registered_with_priority() -> None:
    assert HOOKS.get("timing") is TimingHook
    assert TimingHook().priority == Priority.HIGH + 10
    assert TimingHook().name == "timing"


def test_eta_is_unknown_until_a_step_is_timed() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 0)
    assert engine.state.eta_seconds is None


def test_eta_from_the_first_step_covers_every_step_left_in_the_run() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 0)
    timed_step(engine, clock, 2.0)
    # 3 steps left here + 2 test + 4 train steps, tests priced as train steps for now
    assert engine.state.eta_seconds == pytest.approx(9 * 2.0)


def test_the_price_of_a_step_is_the_runs_mean_so_far() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 0)
    timed_step(engine, clock, 1.0)
    timed_step(engine, clock, 3.0)
    # (1 + 3) / 2 = 2 s a step; 2 + 2 + 4 steps left
    assert engine.state.eta_seconds == pytest.approx(8 * 2.0)


def test_train_and_test_steps_are_priced_apart() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 0)
    for _ in range(4):
        timed_step(engine, clock, 1.0)
    start_phase(engine, clock, 1)
    timed_step(engine, clock, 0.25)
    assert engine.state.eta_seconds == pytest.approx(1 * 0.25 + 4 * 1.0)


def test_the_time_between_phases_is_charged_to_the_phase_that_starts() -> None:
    engine, clock, hook = timed()
    start_phase(engine, clock, 0)
    for _ in range(4):
        timed_step(engine, clock, 1.0)
    start_phase(engine, clock, 1, after=3.0)  # e.g. the kNN meter's pass over the train set
    timed_step(engine, clock, 1.0)
    # the test kind: 3 s between the phases + 1 s of step, over 1 step
    assert hook.seconds_per_step(train=False) == pytest.approx(4.0)
    assert hook.seconds_per_step(train=True) == pytest.approx(1.0)
    assert engine.state.eta_seconds == pytest.approx(1 * 4.0 + 4 * 1.0)


def test_a_phase_of_slow_steps_raises_the_price_at_once() -> None:
    # the first epoch of a short run: the estimate follows the steps, not finished phases
    engine, clock, _ = timed([Phase("train", True, 3), Phase("train", True, 3)])
    start_phase(engine, clock, 0)
    timed_step(engine, clock, 10.0)
    assert engine.state.eta_seconds == pytest.approx(5 * 10.0)
    timed_step(engine, clock, 20.0)
    assert engine.state.eta_seconds == pytest.approx(4 * 15.0)


def test_data_wait_fraction_sums_over_the_phase_only() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 0)
    timed_step(engine, clock, 1.0, data_time=1.0)
    start_phase(engine, clock, 1)
    timed_step(engine, clock, 1.0, data_time=0.5)
    timed_step(engine, clock, 3.0, data_time=0.5)
    assert engine.state.data_wait_fraction == pytest.approx(1.0 / 4.0)


def test_eta_is_zero_on_the_last_step() -> None:
    engine, clock, _ = timed()
    start_phase(engine, clock, 2)
    for _ in range(4):
        timed_step(engine, clock, 1.0)
    assert engine.state.eta_seconds == 0.0


def test_state_dict_makes_the_first_eta_after_a_resume_right() -> None:
    engine, clock, hook = timed()
    start_phase(engine, clock, 0)
    timed_step(engine, clock, 2.0)
    timed_step(engine, clock, 2.0)
    saved = hook.state_dict()
    assert saved == {"seconds": {"train": 4.0, "test": 0.0}, "steps": {"train": 2, "test": 0}}

    resumed, resumed_clock = FakeEngine(phases=PLAN), Clock()
    restored = TimingHook(clock=resumed_clock)
    restored.load_state_dict(saved)
    restored.attach(resumed)
    # the checkpoint was taken after 2 of the phase's 4 steps
    start_phase(resumed, resumed_clock, 0, batches_done=2)
    timed_step(resumed, resumed_clock, 5.0)
    # (4 + 5) / 3 = 3 s a step: 1 step left here, 2 test and 4 train steps after
    assert resumed.state.eta_seconds == pytest.approx(7 * 3.0)


def test_state_from_an_older_checkpoint_is_read_as_one_step_per_kind() -> None:
    hook = TimingHook()
    hook.load_state_dict({"seconds_per_step": {"train": 2.0, "test": None}})
    assert hook.state_dict() == {
        "seconds": {"train": 2.0, "test": 0.0},
        "steps": {"train": 1, "test": 0},
    }
    assert hook.seconds_per_step(train=False) == 2.0

"""The Hook base class's helpers and the named priorities."""

from __future__ import annotations

import pytest
from ignite.engine import Engine

from hookbus import FakeEngine, Hook, Priority, SSLEvents
from hookbus.engine.bus.hook import rank_zero_only
from hookbus.engine.bus.priorities import priority_label


class EveryThird(Hook):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def on_step(self, engine: Engine) -> None:
        if self.every_n_train_iterations(engine, 3):
            self.seen.append(engine.state.iteration)


class WritesOnRankZero(Hook):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @rank_zero_only
    def on_phase_end(self, engine: Engine) -> None:
        self.calls += 1


def test_every_n_train_iterations_counts_train_steps_only() -> None:
    engine = FakeEngine()
    hook = EveryThird().attach(engine)
    for _ in range(7):
        engine.step(train=True)
    for _ in range(3):
        engine.step(train=False)
    assert hook.seen == [3, 6]


@pytest.mark.parametrize("n", [0, -2])
def test_every_n_train_iterations_is_never_true_for_a_frequency_below_one(n: int) -> None:
    engine = FakeEngine(iteration=6, train=True)
    assert not Hook.every_n_train_iterations(engine, n)


@pytest.mark.parametrize(("rank", "calls"), [(0, 1), (1, 0), (3, 0)])
def test_rank_zero_only_runs_the_method_on_rank_zero_alone(rank: int, calls: int) -> None:
    engine = FakeEngine(rank=rank)
    hook = WritesOnRankZero().attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert hook.calls == calls
    assert hook.subscribed_events() == [SSLEvents.ON_PHASE_END]
    assert Hook.is_rank_zero(engine) is (rank == 0)


def test_named_priorities_run_in_their_order() -> None:
    order: list[str] = []

    class Recorder(Hook):
        def on_step(self, engine: Engine) -> None:
            order.append(self.name)

    engine = FakeEngine()
    for level in (Priority.LAST, Priority.REPORT, Priority.FIRST, Priority.NORMAL):
        Recorder(name=level.name, priority=level).attach(engine)
    Recorder(name="plain 5", priority=5).attach(engine)
    engine.fire_event(SSLEvents.ON_STEP)
    assert order == ["FIRST", "NORMAL", "plain 5", "REPORT", "LAST"]


def test_a_hook_without_a_priority_is_normal() -> None:
    assert Hook().priority == Priority.NORMAL == 0


@pytest.mark.parametrize(
    ("value", "label"),
    [(-100, "FIRST"), (-40, "HIGH+10"), (-10, "METHOD+20"), (7, "NORMAL+7"), (100, "LAST")],
)
def test_priority_label_names_the_level_at_or_below(value: int, label: str) -> None:
    assert priority_label(value) == label


def test_priority_label_of_values_outside_the_levels() -> None:
    assert priority_label(-1000) == "FIRST-900"
    assert priority_label(10_000) == "LAST+9900"

"""Priority-ordered dispatch on a real ignite engine."""

from __future__ import annotations

from ignite.engine import Engine, Events

from hookbus import Config, FakeEngine, Hook, Priority, SSLEvents, SSLTrainer
from hookbus.engine.bus.bus_engine import BusEngine
from hookbus.engine.bus.handler_order import handler_priorities, hook_plan


class Tagger(Hook):
    def __init__(self, log: list[str], name: str, priority: int) -> None:
        super().__init__(name=name, priority=priority)
        self.log = log

    def on_step(self, engine: Engine) -> None:
        self.log.append(self.name)


def test_lower_priority_runs_first_whatever_the_attach_order() -> None:
    engine, log = FakeEngine(), []
    for name, priority in [("late", 50), ("early", -5), ("middle", 0)]:
        Tagger(log, name, priority).attach(engine)
    engine.fire_event(SSLEvents.ON_STEP)
    assert log == ["early", "middle", "late"]


def test_equal_priorities_run_in_attach_order() -> None:
    engine, log = FakeEngine(), []
    for name in ["a", "b", "c"]:
        Tagger(log, name, 7).attach(engine)
    engine.fire_event(SSLEvents.ON_STEP)
    assert log == ["a", "b", "c"]


def test_detach_removes_the_handlers() -> None:
    engine, log = FakeEngine(), []
    first = Tagger(log, "first", 0).attach(engine)
    Tagger(log, "second", 1).attach(engine)
    first.detach(engine)
    engine.fire_event(SSLEvents.ON_STEP)
    assert log == ["second"]


def test_hook_plan_names_handlers_per_event() -> None:
    engine = FakeEngine()
    Tagger([], "t", 3).attach(engine)
    plan = hook_plan(engine)
    assert plan["on_step"] == ["t"]
    assert plan["on_start"] == []
    assert handler_priorities(engine)["on_step"] == [("t", 3)]


def test_ignite_every_filter_counts_steps() -> None:
    engine, seen = FakeEngine(), []
    engine.add_event_handler(
        SSLEvents.ON_STEP(every=2), lambda e: seen.append(e.state.local_iteration_num)
    )
    for _ in range(5):
        engine.step()
    assert seen == [2, 4]


def test_hook_events_are_the_methods_it_overrides() -> None:
    class TwoEvents(Hook):
        def on_start(self, engine: Engine) -> None: ...

        def on_update(self, engine: Engine) -> None: ...

    assert TwoEvents().subscribed_events() == [SSLEvents.ON_START, SSLEvents.ON_UPDATE]
    assert TwoEvents().name == "two_events"


def test_events_have_the_hook_method_names() -> None:
    assert [e.value for e in SSLEvents] == [
        "on_start",
        "on_phase_start",
        "on_forward",
        "on_loss_and_meter",
        "on_backward",
        "on_update",
        "on_step",
        "on_phase_end",
        "on_end",
        "on_exception",
    ]


def test_fake_engine_step_skips_backward_and_update_in_test_phases() -> None:
    engine, fired = FakeEngine(train=False), []
    for event in SSLEvents:
        engine.add_event_handler(event, lambda e, ev=event: fired.append(ev.value))
    engine.step()
    assert fired == ["on_forward", "on_loss_and_meter", "on_step"]
    assert engine.state.iteration == 0
    assert engine.state.local_iteration_num == 1


def test_handlers_stand_in_ignites_own_list_in_priority_order() -> None:
    engine = FakeEngine()

    def late(e: Engine) -> None: ...
    def early(e: Engine) -> None: ...
    def middle(e: Engine) -> None: ...

    with engine.at_priority(Priority.LAST):
        engine.add_event_handler(SSLEvents.ON_STEP, late)
    with engine.at_priority(Priority.FIRST):
        engine.add_event_handler(SSLEvents.ON_STEP, early)
    engine.add_event_handler(SSLEvents.ON_STEP, middle)
    stored = [handler for handler, _, _ in engine._event_handlers[SSLEvents.ON_STEP]]
    assert stored == [early, middle, late]


def test_bus_engine_passes_extra_arguments_and_skips_the_engine_when_not_wanted() -> None:
    engine, seen = FakeEngine(), []
    engine.add_event_handler(
        SSLEvents.ON_STEP, lambda e, tag, *, n: seen.append((tag, n)), "a", n=1
    )
    engine.add_event_handler(SSLEvents.ON_STEP, lambda: seen.append("no engine"))
    engine.fire_event(SSLEvents.ON_STEP)
    assert seen == [("a", 1), "no engine"]


def test_bus_engine_forgets_removed_handlers() -> None:
    engine, seen = FakeEngine(), []
    handle = engine.add_event_handler(SSLEvents.ON_STEP, lambda e: seen.append("handle"))

    def by_name(e: Engine) -> None:
        seen.append("by name")

    engine.add_event_handler(SSLEvents.ON_STEP, by_name)
    handle.remove()
    engine.remove_event_handler(by_name, SSLEvents.ON_STEP)
    engine.fire_event(SSLEvents.ON_STEP)
    assert seen == []


def test_a_handler_added_during_a_firing_after_the_firing_one_runs_in_it_as_in_ignite() -> None:
    engine, seen = FakeEngine(), []

    def add_another(e: Engine) -> None:
        seen.append("first")
        if len(seen) == 1:
            e.add_event_handler(SSLEvents.ON_STEP, lambda _: seen.append("added"))

    engine.add_event_handler(SSLEvents.ON_STEP, add_another)
    engine.fire_event(SSLEvents.ON_STEP)
    engine.fire_event(SSLEvents.ON_STEP)
    assert seen == ["first", "added", "first", "added"]


def test_bus_engine_leaves_ignite_events_to_ignite() -> None:
    engine, seen = FakeEngine(), []
    engine.add_event_handler(Events.EPOCH_COMPLETED, lambda e: seen.append(e.last_event_name))
    engine.fire_event(Events.EPOCH_COMPLETED)
    assert seen == [Events.EPOCH_COMPLETED]


def test_trainer_and_fake_engine_use_the_bus_engine(tiny_cfg: Config) -> None:
    assert isinstance(SSLTrainer(tiny_cfg, hooks=[]).engine, BusEngine)
    assert isinstance(FakeEngine(), BusEngine)

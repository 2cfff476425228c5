"""MeterSyncHook against the fake engine."""

from __future__ import annotations

from ignite.engine import Engine

from hookbus import FakeEngine, Hook, SSLEvents
from hookbus.hooks.meter_sync import MeterSyncHook


class FixedMeter:
    name = "fixed"

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values
        self.synced = 0

    def sync_state(self) -> None:
        self.synced += 1

    def value(self) -> dict[str, float]:
        return dict(self.values)


def test_syncs_every_meter_and_publishes_their_values() -> None:
    meters = [FixedMeter({"a": 0.5}), FixedMeter({"b": 0.25})]
    engine = FakeEngine(meters=meters)
    MeterSyncHook().attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert engine.state.metrics == {"a": 0.5, "b": 0.25}
    assert [m.synced for m in meters] == [1, 1]


def test_runs_before_other_phase_end_handlers() -> None:
    class Reader(Hook):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[dict] = []

        def on_phase_end(self, engine: Engine) -> None:
            self.seen.append(dict(engine.state.metrics))

    engine = FakeEngine(meters=[FixedMeter({"a": 1.0})])
    reader = Reader().attach(engine)
    MeterSyncHook().attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert reader.seen == [{"a": 1.0}]

"""A public test kit: run a hook's handlers without a model, data or a training loop."""

from __future__ import annotations

from typing import Any

from hookbus.engine.bus import BusEngine
from hookbus.engine.events import SSLEvents
from hookbus.engine.run_engine import RunEngine
from hookbus.engine.state import RunState


def _no_step(engine: RunEngine, batch: Any) -> None:
    return None


class FakeEngine(BusEngine):
    """The trainer's ignite engine (:class:`hookbus.engine.bus.BusEngine`) with a default run state.

    Hooks attach to it exactly as to :attr:`hookbus.SSLTrainer.engine`;
    ``fire_event(SSLEvents.X)`` runs their handlers in priority order. Run-state fields
    are set with keyword arguments or directly on ``engine.state``.

    Example::

        engine = FakeEngine(iteration=9, train=True)
        hook = MyHook().attach(engine)
        engine.state.iteration += 1
        engine.fire_event(SSLEvents.ON_STEP)
        assert hook.calls == 1
    """

    def __init__(self, **state_fields: Any) -> None:
        super().__init__(_no_step)
        self.state = RunState(**state_fields)

    def step(self, *, train: bool | None = None) -> None:
        """Fire the events of one step as the standard train step does, counters included."""
        state = self.state
        if train is not None:
            state.train = train
        if state.train:
            state.iteration += 1
        state.local_iteration_num += 1
        self.fire_event(SSLEvents.ON_FORWARD)
        self.fire_event(SSLEvents.ON_LOSS_AND_METER)
        if state.train:
            self.fire_event(SSLEvents.ON_BACKWARD)
            state.updates += 1
            self.fire_event(SSLEvents.ON_UPDATE)
        state.batches += 1
        self.fire_event(SSLEvents.ON_STEP)

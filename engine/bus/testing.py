"""A public test kit: run a hook's handlers without a model, data or a training loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ignite.engine import Events

from hookbus.engine.bus.bus_engine import BusEngine
from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState

if TYPE_CHECKING:
    import torch

    from hookbus.engine.bus.phases import Phase


def _no_step(engine: RunEngine, batch: Any) -> None:
    return None


class FakeEngine(BusEngine):
    """The trainer's ignite engine (:class:`hookbus.engine.bus.bus_engine.BusEngine`)
    with a default run state.

    Hooks attach to it exactly as to :attr:`hookbus.SSLTrainer.engine`;
    ``fire_event(SSLEvents.X)`` runs their handlers in priority order. Run-state fields
    are set with keyword arguments or directly on ``engine.state``. :meth:`begin_phase`,
    :meth:`step` and :meth:`end_phase` move the run state through the loop's
    transitions (:class:`hookbus.RunState`'s ``begin_phase``, ``begin_step``,
    ``end_step``, ``end_phase``), the ones the trainer and the standard train step use,
    and fire the events around them, ignite's included: in a train phase
    ``EPOCH_STARTED``, each step's ``GET_BATCH_*`` and ``ITERATION_*``, and
    ``EPOCH_COMPLETED``, so an ignite metric attached with its default usage computes
    on the fake steps as on the trainer's.

    Example::

        engine = FakeEngine(phases=[Phase("train", True, 4)])
        hook = MyHook().attach(engine)
        engine.begin_phase(0)
        engine.step(batch_time=0.5)
        assert engine.state.iteration == 1 and hook.calls == 1
    """

    def __init__(self, **state_fields: Any) -> None:
        super().__init__(_no_step)
        self.state = RunState(**state_fields)
        self._meters = list(self.state.meters)

    def begin_phase(self, phase_idx: int, *, batches_done: int | None = None) -> Phase:
        """Enter phase ``phase_idx`` of ``state.phases`` as the trainer does, then fire
        ``on_phase_start`` and, in a train phase, set ``state.epoch`` and fire ignite's
        ``EPOCH_STARTED``; returns the phase. The phase's meters are those among the
        ``meters`` the engine was made with that its kind uses (``meter.phases``)."""
        phase = self.state.begin_phase(phase_idx, self._meters, batches_done=batches_done)
        self.fire_event(SSLEvents.ON_PHASE_START)
        if phase.train:
            self.state.epoch = self.state.train_phase_idx + 1
            self.fire_event(Events.EPOCH_STARTED)
        return phase

    def step(
        self,
        *,
        train: bool | None = None,
        loss: torch.Tensor | None = None,
        batch: Any = None,
        output: Any = None,
        batch_time: float = 0.0,
        data_time: float = 0.0,
    ) -> None:
        """Fire the events of one step as the trainer and the standard train step do,
        counters included: ``batch`` becomes ``state.batch`` (ignite's
        ``GET_BATCH_STARTED`` and ``GET_BATCH_COMPLETED`` around it in a train phase);
        the step is counted (``iteration`` in a train phase, ``local_iteration_num``),
        then ignite's ``ITERATION_STARTED`` (train) and ``on_forward``; ``loss``, when
        given, is kept and added to ``loss_sum`` before ``on_loss_and_meter``; a train
        step counts an update before ``on_update``; the step ends (``output``, or the
        loss, as ``state.output``; ``batches``, ``batch_time``, ``data_time``) before
        ignite's ``ITERATION_COMPLETED`` (train) and ``on_step``. ``train`` sets
        ``state.train`` first."""
        state = self.state
        if train is not None:
            state.train = train
        if state.train:
            self.fire_event(Events.GET_BATCH_STARTED)
        state.batch = batch
        state.output = None
        if state.train:
            self.fire_event(Events.GET_BATCH_COMPLETED)
        state.begin_step()
        if state.train:
            self.fire_event(Events.ITERATION_STARTED)
        self.fire_event(SSLEvents.ON_FORWARD)
        if loss is not None:
            state.add_loss(loss)
        self.fire_event(SSLEvents.ON_LOSS_AND_METER)
        if state.train:
            self.fire_event(SSLEvents.ON_BACKWARD)
            state.count_update()
            self.fire_event(SSLEvents.ON_UPDATE)
        state.end_step(
            state.loss if output is None else output, batch_time=batch_time, data_time=data_time
        )
        if state.train:
            self.fire_event(Events.ITERATION_COMPLETED)
        self.fire_event(SSLEvents.ON_STEP)

    def end_phase(self) -> None:
        """Fire ``on_phase_end`` and, in a train phase, ignite's ``EPOCH_COMPLETED`` after
        its handlers (the trainer fires it among them, right after the meter sync), then
        close the phase as the trainer does (its record joins ``state.history``)."""
        self.fire_event(SSLEvents.ON_PHASE_END)
        if self.state.train:
            outer = self.last_event_name
            self.fire_event(Events.EPOCH_COMPLETED)
            self.last_event_name = outer
        self.state.end_phase()

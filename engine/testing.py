"""A public test kit: run a hook's handlers without a model, data or a training loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ignite.engine import Engine

from hookbus.engine.bus import BusEngine
from hookbus.engine.events import SSLEvents
from hookbus.engine.state import RunState

if TYPE_CHECKING:
    import torch

    from hookbus.engine.phases import Phase


def _no_step(engine: Engine, batch: Any) -> None:
    return None


class FakeEngine(BusEngine):
    """The trainer's ignite engine (:class:`hookbus.engine.bus.BusEngine`) with a default run state.

    Hooks attach to it exactly as to :attr:`hookbus.SSLTrainer.engine`;
    ``fire_event(SSLEvents.X)`` runs their handlers in priority order. Run-state fields
    are set with keyword arguments or directly on ``engine.state``. :meth:`begin_phase`,
    :meth:`step` and :meth:`end_phase` move the run state through the loop's
    transitions (:class:`hookbus.RunState`'s ``begin_phase``, ``begin_step``,
    ``end_step``, ``end_phase``), the ones the trainer and the standard train step use,
    and fire the events around them.

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
        ``on_phase_start``; returns the phase. The phase's meters are those among the
        ``meters`` the engine was made with that its kind uses (``meter.phases``)."""
        phase = self.state.begin_phase(phase_idx, self._meters, batches_done=batches_done)
        self.fire_event(SSLEvents.ON_PHASE_START)
        return phase

    def step(
        self,
        *,
        train: bool | None = None,
        loss: torch.Tensor | None = None,
        batch_time: float = 0.0,
        data_time: float = 0.0,
    ) -> None:
        """Fire the events of one step as the trainer and the standard train step do,
        counters included: the step is counted (``iteration`` in a train phase,
        ``local_iteration_num``) before ``on_forward``; ``loss``, when given, is kept
        and added to ``loss_sum`` before ``on_loss_and_meter``; a train step counts an
        update before ``on_update``; the step ends (``batches``, ``batch_time``,
        ``data_time``, seconds) before ``on_step``. ``train`` sets ``state.train``
        first."""
        state = self.state
        if train is not None:
            state.train = train
        state.begin_step()
        self.fire_event(SSLEvents.ON_FORWARD)
        if loss is not None:
            state.add_loss(loss)
        self.fire_event(SSLEvents.ON_LOSS_AND_METER)
        if state.train:
            self.fire_event(SSLEvents.ON_BACKWARD)
            state.count_update()
            self.fire_event(SSLEvents.ON_UPDATE)
        state.end_step(state.loss, batch_time=batch_time, data_time=data_time)
        self.fire_event(SSLEvents.ON_STEP)

    def end_phase(self) -> None:
        """Fire ``on_phase_end``, then close the phase as the trainer does (its record
        joins ``state.history``)."""
        self.fire_event(SSLEvents.ON_PHASE_END)
        self.state.end_phase()

"""The SSL events: one ignite custom event per hook function."""

from __future__ import annotations

from ignite.engine import EventEnum, Events


class SSLEvents(EventEnum):
    """Events fired by :class:`hookbus.SSLTrainer`, named after the hook methods they call.

    ========================  ==============================================================
    event                     fires
    ========================  ==============================================================
    ``on_start``              once, after prepare, DDP wrap and state restore
    ``on_phase_start``        each phase, after the phase is advanced (sampler epoch set,
                              meters reset, model in train or eval mode)
    ``on_forward``            in the step, after the model forward
    ``on_loss_and_meter``     after the loss, its all-reduce for logging and meter updates
    ``on_backward``           train phases only, after backward
    ``on_update``             train phases only, after an optimizer step
    ``on_step``               after every step, counters updated
    ``on_phase_end``          after a barrier across ranks; the meter-sync hook runs first
    ``on_end``                after the last phase; data iterators are released after it
    ``on_exception``          any exception but the end of a phase's data; it then propagates
    ========================  ==============================================================
    """

    ON_START = "on_start"
    ON_PHASE_START = "on_phase_start"
    ON_FORWARD = "on_forward"
    ON_LOSS_AND_METER = "on_loss_and_meter"
    ON_BACKWARD = "on_backward"
    ON_UPDATE = "on_update"
    ON_STEP = "on_step"
    ON_PHASE_END = "on_phase_end"
    ON_END = "on_end"
    ON_EXCEPTION = "on_exception"


EVENT_COUNTERS: dict[SSLEvents, str] = {
    SSLEvents.ON_FORWARD: "local_iteration_num",
    SSLEvents.ON_LOSS_AND_METER: "local_iteration_num",
    SSLEvents.ON_BACKWARD: "iteration",
    SSLEvents.ON_UPDATE: "updates",
    SSLEvents.ON_STEP: "local_iteration_num",
    SSLEvents.ON_PHASE_START: "phase_number",
    SSLEvents.ON_PHASE_END: "phase_number",
}
"""The run-state counter that ignite's filters (``every``, ``once``, ``before``,
``after``, ``event_filter``) read for each SSL event. Each counter is advanced before
its event fires, so it equals the number of firings of that event in the run:
``SSLEvents.ON_UPDATE(every=3)`` runs on the 3rd, 6th, 9th optimizer step, as ignite's
``Events.ITERATION_COMPLETED(every=3)`` does on iterations 3, 6, 9. The counters are
restored with the checkpoint, so the count goes on across a resume. ``on_start``,
``on_end`` and ``on_exception`` fire once and take no filter."""

PHASE_EVENTS: tuple[SSLEvents, ...] = (SSLEvents.ON_PHASE_START, SSLEvents.ON_PHASE_END)
"""The events of a phase boundary: their filters count phases (``phase_number``), and
the global step ignite's handlers read of them is the epoch
(:meth:`hookbus.RunState.get_event_attrib_value`)."""

IGNITE_EVENTS: dict[Events, str] = {  # when each fires in a hookbus run
    Events.STARTED: "once per `train()`, right after `on_start`; `state.epoch` is the "
    "number of train phases already done",
    Events.EPOCH_STARTED: "at each train phase, right after `on_phase_start`; "
    "`state.epoch` counts train phases from 1",
    Events.GET_BATCH_STARTED: "train phases: before a batch is fetched",
    Events.GET_BATCH_COMPLETED: "train phases: after it is fetched; `state.batch` holds it "
    "(a handler may replace it: the step gets `state.batch`, as in ignite)",
    Events.ITERATION_STARTED: "train phases: before the train step; `state.iteration` "
    "already counts it; the step then gets `state.batch`",
    Events.ITERATION_COMPLETED: "train phases: after the step and its counters, right "
    "before `on_step`; `state.output` holds what the step returned (the loss)",
    Events.EPOCH_COMPLETED: "at the end of each train phase, inside `on_phase_end` right "
    "after the meter sync (so the phase's metrics are final, and what an ignite metric "
    "computes here is recorded with them)",
    Events.TERMINATE: "after `terminate()` was honoured at a step or phase boundary, "
    "before `COMPLETED`",
    Events.TERMINATE_SINGLE_EPOCH: "after `terminate_epoch()` ended the current phase "
    "early, before its `on_phase_end`",
    Events.COMPLETED: "once per `train()`, after the last phase (or a honoured "
    "`terminate()`), right before `on_end`",
    Events.EXCEPTION_RAISED: "when anything raises, before the `on_exception` hooks; its "
    "handlers get the exception and can never swallow it",
}

IGNITE_EVENTS_DOC = (
    "Test phases fire the SSL events only: ignite's handlers see them through "
    "``on_phase_start`` and ``on_phase_end`` (with ``state.train`` False; a filter such as "
    "``SSLEvents.ON_PHASE_END(event_filter=lambda engine, _: not engine.state.train)`` "
    "picks them), never as epochs or iterations, so epoch-wise metrics, schedulers and "
    "checkpoints count train phases alone."
)
"""What :data:`IGNITE_EVENTS` says of test phases."""

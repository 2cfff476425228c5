"""The SSL events: one ignite custom event per hook function."""

from __future__ import annotations

from ignite.engine import EventEnum


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


# Counters that ignite's ``every=``/``once=`` filters read for each event.
EVENT_COUNTERS: dict[SSLEvents, str] = {
    SSLEvents.ON_FORWARD: "local_iteration_num",
    SSLEvents.ON_LOSS_AND_METER: "local_iteration_num",
    SSLEvents.ON_BACKWARD: "iteration",
    SSLEvents.ON_UPDATE: "iteration",
    SSLEvents.ON_STEP: "local_iteration_num",
    SSLEvents.ON_PHASE_START: "phase_idx",
    SSLEvents.ON_PHASE_END: "phase_idx",
}

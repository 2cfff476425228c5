"""Stopping a run: one path for every way to ask.

Every stop is a request recorded where the trainer reads it, and every request is read
at one place, :func:`phase_end_at`, at each boundary of the loop (before each phase,
after ``on_phase_start``, after each step, after the last phase):

====================================  ==============================================
who asks                              the request
====================================  ==============================================
``engine.terminate()`` (a handler,    ``engine.should_terminate`` (and who asked, in
ignite's ``EarlyStopping``...)        ``state.stopped_by``)
``engine.terminate_epoch()``          ``engine.should_terminate_single_epoch``
SIGTERM, SIGUSR1 (a preemption)       ``state.stop_requested`` (the signal's name)
Ctrl-C (SIGINT)                       ``state.stop_requested`` (:data:`CTRL_C`)
====================================  ==============================================

Several processes agree on the requests first
(:func:`hookbus.engine.process.preemption.agreed_stops`), so every rank stops after the
same step. :func:`phase_end_at` turns them into how the phase ends
(:class:`hookbus.engine.bus.phases.PhaseEnd`), and the trainer ends the run from that
alone: a preemption or Ctrl-C raises :func:`stop_error` after the step's checkpoint; a
``terminate()`` ends the run cleanly with :func:`stop_line`; ``terminate_epoch()``
ends the phase.
"""

from __future__ import annotations

from typing import Any

from hookbus.engine.bus.phases import PhaseEnd, phase_label
from hookbus.engine.bus.state import RunState
from hookbus.engine.errors import InterruptedRun, PreemptedError
from hookbus.engine.process.preemption import CTRL_C, Stops, agreed_stops


def phase_end_at(
    engine: Any, stops: Stops | None = None, *, after_step: bool = False
) -> PhaseEnd | None:
    """How the phase ends at this boundary (None: it goes on), from ``stops`` (the
    requests every rank agreed on; agreed here when not given).

    Between phases only ``terminate()`` counts; after a step also a preemption and
    ``terminate_epoch()``. A stop asked after the agreement (in ``on_step``) is agreed
    at the next boundary; one process honours it at once."""
    stops = agreed_stops(engine) if stops is None else stops
    alone = engine.state.world_size == 1
    if after_step and stops.preempt:
        return PhaseEnd.PREEMPTED
    if stops.terminate or (alone and bool(engine.should_terminate)):
        return PhaseEnd.STOPPED
    if not after_step:
        return None
    if stops.terminate_epoch or (alone and bool(engine.should_terminate_single_epoch)):
        if engine.should_terminate_single_epoch == "skip_epoch_completed":
            return PhaseEnd.ENDED_EARLY_QUIETLY
        return PhaseEnd.ENDED_EARLY
    return None


def stop_error(state: RunState) -> PreemptedError | InterruptedRun:
    """The error a preempted run ends with (after its step's checkpoint): Ctrl-C's
    :class:`InterruptedRun` (exit status 130) or :class:`PreemptedError` (75)."""
    stop = InterruptedRun if state.stop_requested == CTRL_C else PreemptedError
    return stop(
        f"stopped by {state.stop_requested} in "
        f"{phase_label(state.phase_idx, len(state.phases))} after step {state.batches} "
        f"(train iteration {state.iteration}); run the same command again to resume"
    )


def stop_line(state: RunState) -> str:
    """One line on a run stopped early: by what, where, and how to go on."""
    where = (
        f"in {phase_label(state.phase_idx, len(state.phases))} after step {state.batches} "
        f"of {state.phase_length}"
        if 0 <= state.phase_idx < len(state.phases)
        else "before its first phase"
    )
    return (
        f"stopped early by {state.stopped_by} {where} (train iteration {state.iteration}); "
        "the run counts as finished: run again with trainer.resume_stopped=true to go on"
    )

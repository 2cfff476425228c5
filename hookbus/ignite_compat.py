"""ignite's compatibility in one place: what a hookbus run does so that ignite's handlers,
metrics and habits work on the trainer's engine.

:class:`IgniteCompat` is the one interface the trainer calls for ignite. It fires
ignite's events around the SSL events the trainer fires (``STARTED``,
``EPOCH_STARTED``, the per-step ``GET_BATCH_*`` and ``ITERATION_*`` of train phases,
``EPOCH_COMPLETED`` inside ``on_phase_end`` right after the meter sync,
``TERMINATE_SINGLE_EPOCH``, ``TERMINATE``, ``COMPLETED`` and ``EXCEPTION_RAISED``),
notices an ignite learning-rate scheduler or ``FastaiLRFinder`` attached to the engine
(a finder's ``train()`` is its sweep: the hooks that record the run are set aside
until it ends), and refuses ignite's way of resuming (counters loaded into the engine
that are not hookbus's resume point). The engine's own refusals (``run()``,
``set_data()``, ``interrupt()``) and ``terminate()``'s record of who asked are the
bus engine's (:mod:`hookbus.engine.bus.bus_engine`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ignite.engine import Engine, Events
from ignite.handlers import FastaiLRFinder

from hookbus.engine.bus.bus_engine import BusEngine
from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.handler_order import add_handler
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.lr_scheduler import lr_scheduler_name
from hookbus.engine.bus.phases import PhaseEnd, phase_label
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.metrics_json import MetricsJsonHook

logger = logging.getLogger("hookbus")

EPOCH_COMPLETED_PRIORITY = Priority.FIRST + 10
"""Where ignite's ``EPOCH_COMPLETED`` fires among the ``on_phase_end`` handlers of a
train phase: right after the meter sync, before every report."""

SWEEP_SETS_ASIDE = (CheckpointHook, MetricsJsonHook)
"""The hooks that record the run, set aside during a learning-rate sweep."""


class IgniteCompat:
    """ignite's events, learning-rate tools and resume refusal for one trainer's engine.

    Built with the trainer (it attaches the ``EPOCH_COMPLETED`` firing to
    ``on_phase_end``); the trainer calls :meth:`check_loaded_counters` before the run,
    :meth:`start` after ``on_start``, :meth:`begin_phase` and :meth:`fire` for the
    per-phase and per-step events of train phases, :meth:`phase_ended_early`, :meth:`finish`,
    :meth:`exception`, and :meth:`close` when ``train()`` returns or raises.
    """

    def __init__(self, engine: BusEngine, hooks: list[Hook]) -> None:
        self.engine = engine
        self.hooks = hooks
        self.sweep: FastaiLRFinder | None = None
        self.phase_started = 0.0
        self.quiet_phase_end = False
        self._set_aside: list[Hook] = []
        add_handler(
            engine,
            SSLEvents.ON_PHASE_END,
            self._fire_epoch_completed,
            priority=EPOCH_COMPLETED_PRIORITY,
            name="ignite EPOCH_COMPLETED",
        )

    def begin_phase(self) -> None:
        """Before a phase's ``on_phase_start``: start the clock of ``EPOCH_COMPLETED``'s
        time (``state.times``)."""
        self.phase_started = time.perf_counter()
        self.quiet_phase_end = False

    def fire(self, event: Any) -> None:
        """Fire one of ignite's per-phase or per-step events in a train phase (test
        phases fire none)."""
        if self.engine.state.train:
            self.engine.fire_event(event)

    def check_loaded_counters(self, resume_iteration: int) -> None:
        """Refuse ignite's way of resuming: counters loaded into the engine
        (``Checkpoint.load_objects({"trainer": engine, ...})``, ``engine.load_state_dict``)
        that are not where hookbus's own resume puts the run (``resume_iteration``)."""
        loaded = self.engine.take_loaded_counters()
        state = self.engine.state
        if loaded is None:
            return
        if loaded == resume_iteration:  # the plan's sizes, not the loaded ones
            state.take_plan(state.phases, epoch_length=len(state.data_loaders["train"]))
            return
        where = (
            f"the checkpoint {state.resumed_from} at iteration {resume_iteration}"
            if state.resumed_from
            else "a fresh start (no checkpoint in it)"
        )
        raise ConfigError(
            f"the engine's counters were loaded at train iteration {loaded} "
            "(Checkpoint.load_objects with 'trainer', or engine.load_state_dict), but "
            f"hookbus resumes {state.run_dir} from {where}: hookbus resumes a run from "
            "its own checkpoints (checkpoint.auto_resume: run again on the same "
            "checkpoint.dir; they carry the counters, RNG, meters and hook states an exact "
            "continuation needs). Load only the model and optimizer with load_objects, "
            "without 'trainer', for a warm start; nothing was trained"
        )

    def start(self) -> None:
        """After ``on_start``: note an attached learning-rate scheduler or sweep, then
        fire ``STARTED``."""
        engine, state = self.engine, self.engine.state
        state.lr_scheduler = lr_scheduler_name(engine)
        if state.lr_scheduler:
            logger.info(
                "learning rate: set by the %s attached to the engine; the config's "
                "schedule (optimizer.warmup_epochs, cosine) steps aside",
                state.lr_scheduler,
            )
            if any(group.get("lr_scale", 1.0) != 1 for group in state.optimizer.param_groups):
                logger.warning(
                    "learning rate: the %s sets the parameter groups' rates itself, without "
                    "their lr_scale multiples (model.fine_tune.backbone_lr_scale, "
                    "layer_decay); give each group its own schedule (ParamGroupScheduler)",
                    state.lr_scheduler,
                )
        self.sweep = _lr_finder(engine)
        if self.sweep is not None:
            self._begin_sweep(self.sweep)
        engine.fire_event(Events.STARTED)

    def _begin_sweep(self, finder: FastaiLRFinder) -> None:
        """A ``train()`` with ignite's ``FastaiLRFinder`` attached is its sweep: the
        finder sets the learning rate, and the hooks that record the run (checkpoints,
        ``metrics.json``) are set aside until it ends, so the sweep's weights are never
        taken for the run's."""
        self._set_aside = [hook for hook in self.hooks if isinstance(hook, SWEEP_SETS_ASIDE)]
        for hook in self._set_aside:
            hook.detach(self.engine)
        self.engine.state.lr_scheduler = type(finder).__name__
        logger.info(
            "learning-rate sweep by %s: it sets the learning rate; no checkpoint and no "
            "metrics.json line is written until it ends (%s set aside)",
            type(finder).__name__,
            ", ".join(hook.name for hook in self._set_aside) or "no hook",
        )

    def close(self) -> None:
        """When ``train()`` returns or raises: the hooks a sweep set aside come back."""
        for hook in self._set_aside:
            hook.attach(self.engine)
        self._set_aside = []
        self.sweep = None

    def phase_ended_early(self, quietly: bool) -> None:
        """Honour ``terminate_epoch()`` after this step: ``TERMINATE_SINGLE_EPOCH``, and
        no ``EPOCH_COMPLETED`` when ``quietly`` (``skip_epoch_completed=True``)."""
        engine, state = self.engine, self.engine.state
        engine.should_terminate_single_epoch = False
        self.quiet_phase_end = quietly
        logger.info(
            "%s ended early by terminate_epoch() after %d of %d steps",
            phase_label(state.phase_idx, len(state.phases)),
            state.batches,
            state.phase_length,
        )
        engine._fire_event(Events.TERMINATE_SINGLE_EPOCH, iter_counter=state.batches)

    def finish(self, ended: PhaseEnd, started: float, stop_line: str) -> None:
        """After the last phase that ran: ``TERMINATE`` for a stopped run (logging
        ``stop_line``, or the sweep's end), then ``COMPLETED`` unless
        ``terminate(skip_completed=True)`` asked otherwise."""
        engine, state = self.engine, self.engine.state
        if ended is PhaseEnd.STOPPED:
            if self.sweep is None:
                logger.warning("%s", stop_line)
                state.summary["stopped"] = stop_line
            else:
                logger.info(
                    "learning-rate sweep ended by %s at train iteration %d",
                    state.stopped_by,
                    state.iteration,
                )
            engine.fire_event(Events.TERMINATE)
        state.times[Events.COMPLETED.name] = time.perf_counter() - started
        if engine.should_terminate != "skip_completed":
            engine.fire_event(Events.COMPLETED)

    def exception(self, exc: BaseException) -> None:
        """Run ignite's ``EXCEPTION_RAISED`` handlers with the exception; a failing
        handler is logged, not raised."""
        engine = self.engine
        if engine._event_handlers.get(Events.EXCEPTION_RAISED):
            try:
                engine._fire_event(Events.EXCEPTION_RAISED, exc)
            except Exception:
                logger.exception("an EXCEPTION_RAISED handler failed while handling %r", exc)

    def _fire_epoch_completed(self, engine: Engine) -> None:
        """ignite's ``EPOCH_COMPLETED`` at the end of a train phase, inside
        ``on_phase_end`` after the meter sync, so that ignite's handlers see the synced
        meters and hookbus's reports see what ignite's metrics computed; not after
        ``terminate_epoch(skip_epoch_completed=True)``. ``last_event_name`` is kept for
        the ``on_phase_end`` handlers after it."""
        state = self.engine.state
        if not state.train or self.quiet_phase_end:
            return
        state.times[Events.EPOCH_COMPLETED.name] = time.perf_counter() - self.phase_started
        outer = engine.last_event_name
        engine.fire_event(Events.EPOCH_COMPLETED)
        engine.last_event_name = outer


def _lr_finder(engine: Engine) -> FastaiLRFinder | None:
    """The ``FastaiLRFinder`` whose sweep this run is (its ``attach`` block), or None."""
    for stored, _, _ in engine._event_handlers.get(Events.STARTED, ()):
        owner = getattr(stored, "__self__", None)
        if isinstance(owner, FastaiLRFinder):
            return owner
    return None

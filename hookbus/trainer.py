"""SSLTrainer: VISSL's train workflow as a phase loop firing events on an ignite Engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ignite.engine import Engine, Events
from ignite.handlers import FastaiLRFinder
from torch import nn
from torch.utils.data import Dataset

from hookbus.config import Config
from hookbus.console import console_unless_configured
from hookbus.engine.bus.bus_engine import BusEngine
from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.handler_order import add_handler, hook_plan
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.lr_scheduler import lr_scheduler_name
from hookbus.engine.bus.phases import PhaseEnd, build_phase_plan, phase_label
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import (
    newest_valid_checkpoint,
    remove_stale_temporaries,
    write_text_atomic,
)
from hookbus.engine.checkpoint.end_of_run import end_work_owed, owe_end_work, settle_end_work
from hookbus.engine.checkpoint.run_lock import RunLock, check_run_dir
from hookbus.engine.checkpoint.sharded_checkpoint import resume_check
from hookbus.engine.checkpoint.training_state import ResumePoint, restore_training_state
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.engine.config.imports import import_user_modules
from hookbus.engine.errors import (
    CheckpointWriteError,
    ConfigError,
    InterruptedRun,
    PreemptedError,
)
from hookbus.engine.process import distributed
from hookbus.engine.process.distributed import check_device
from hookbus.engine.process.machine import ProcessSettings, configure_process, restore_settings
from hookbus.engine.process.preemption import CTRL_C, PreemptionGuard, Stops, agreed_stops
from hookbus.engine.registry import UnknownNameError
from hookbus.hook_set import default_hooks
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.metrics_json import MetricsJsonHook
from hookbus.parts.data import build_data_loaders, finish_views, set_loader_epoch
from hookbus.parts.python_parts import OptimizerFactory, PythonParts, initial_copy
from hookbus.parts.task import check_component_names, check_options_are_read, prepare_task
from hookbus.steps import get_train_step

logger = logging.getLogger("hookbus")

EPOCH_COMPLETED_PRIORITY = Priority.FIRST + 10
"""Where ignite's ``EPOCH_COMPLETED`` fires among the ``on_phase_end`` handlers of a
train phase: right after the meter sync, before every report."""


class SSLTrainer:
    """Runs train and test phases on :attr:`engine`, an ignite ``Engine`` used as the bus.

    ``train()`` follows VISSL's trainer: the train step is looked up by name
    (``trainer.train_step_name``), the task is prepared (data, model, loss, optimizer,
    meters), the model is wrapped for DDP when distributed, the training state is restored
    from the newest checkpoint, then the phases run (see
    :func:`hookbus.engine.bus.phases.build_phase_plan`). ignite's own events fire around the
    train phases and steps (:data:`hookbus.engine.bus.events.IGNITE_EVENTS`), so ignite's
    handlers and metrics work on :attr:`engine`; ``engine.terminate()`` and
    ``engine.terminate_epoch()`` are honoured at the next step or phase boundary. A
    barrier is passed before ``on_phase_end``, whose first handler (the meter-sync hook)
    syncs the meters. Any exception runs ignite's ``EXCEPTION_RAISED`` handlers and the
    ``on_exception`` handlers and then reaches the caller.

    Args:
        cfg: the validated config.
        hooks: the hooks to attach; None means :func:`hookbus.default_hooks` (cfg), a
            list means exactly those.
        backbone: a module mapping images ``[B, C, H, W]`` to features ``[B, D]``, in
            place of ``model.backbone.name`` (``D`` from its ``out_dim`` or one forward
            pass; ``model.head.dims[0]`` is ``backbone`` or equals it).
        train_data: a map-style data set of ``(image, label)`` items (a tensor
            ``[C, H, W]`` or a PIL image), in place of ``data.name``.
        test_data: the same for the test phases; without it, the train data is also
            the test data.
        optimizer: a factory called with the model to train that returns its optimizer,
            in place of ``optimizer.name``; the config's learning-rate schedule sets
            its groups' learning rate every step.
        loss: a loss module called as the method's loss is, in place of the one
            ``loss.name`` builds (the name still chooses the method's hooks).

    The parts given from Python are recorded by class in the effective config's
    ``from_python`` section (``config.yaml``, checkpoints); a resumed run must be given
    the same kinds of objects (see :class:`hookbus.parts.python_parts.PythonParts`).

    Example::

        cfg = load_config("configs/simclr_digits.yaml", ["optimizer.num_epochs=2"])
        trainer = SSLTrainer(cfg, hooks=[*default_hooks(cfg), MyHook()])
        trainer.setup()  # optional: the model and optimizer exist from here on
        ModelCheckpoint("runs/best", n_saved=2).attach(...)  # any ignite handler
        trainer.train()
    """

    def __init__(
        self,
        cfg: Config,
        hooks: Sequence[Hook] | None = None,
        *,
        backbone: nn.Module | None = None,
        train_data: Dataset | None = None,
        test_data: Dataset | None = None,
        optimizer: OptimizerFactory | None = None,
        loss: nn.Module | None = None,
    ) -> None:
        import_user_modules(cfg.trainer.imports, cfg.trainer.import_paths)
        self.parts = PythonParts(backbone, train_data, test_data, optimizer, loss)
        cfg = self.parts.apply_to(cfg)
        check_component_names(cfg)
        check_options_are_read(cfg)
        check_device(cfg)
        check_run_dir(Path(cfg.checkpoint.dir))
        try:
            self.train_step = get_train_step(cfg.trainer.train_step_name)
        except UnknownNameError as exc:
            raise ConfigError(f"trainer.train_step_name: {exc}") from None
        self.cfg = cfg
        self.hooks: list[Hook] = list(default_hooks(cfg) if hooks is None else hooks)
        _check_hooks(self.hooks)
        self.engine = BusEngine(self.train_step)
        self.engine.state = RunState(cfg=cfg, run_dir=Path(cfg.checkpoint.dir), hooks=self.hooks)
        if backbone is not None and cfg.hooks.evaluation_report.enabled:
            self.engine.state.initial_backbone = initial_copy(backbone)
        add_handler(
            self.engine,
            SSLEvents.ON_PHASE_END,
            self._fire_epoch_completed,
            priority=EPOCH_COMPLETED_PRIORITY,
            name="ignite EPOCH_COMPLETED",
        )
        for hook in self.hooks:
            hook.attach(self.engine)
        self._iterator: Any = None
        self._meters: list[Any] = []
        self._settings_before: ProcessSettings | None = None
        self._start: ResumePoint | None = None
        self._lock: RunLock | None = None
        self._phase_started = 0.0
        self._phase_end = PhaseEnd.COMPLETED
        self._resume_iteration = 0
        self._set_aside: list[Hook] = []

    @property
    def state(self) -> RunState:
        """The run state (``engine.state``)."""
        return self.engine.state

    def hook_plan(self) -> dict[str, list[str]]:
        """For each event, the names of its handlers in the order they run."""
        return hook_plan(self.engine)

    def setup(self) -> RunState:
        """Build the task and restore the newest checkpoint, without training; returns
        the run state. ``train()`` calls it when it was not called before.

        After it, ``state.model``, ``state.optimizer`` and the data loaders exist, so
        ignite handlers that need them (``ModelCheckpoint``, a ``ParamScheduler`` on the
        optimizer) can be built and attached before ``train()``. Rank 0 takes the run
        directory's lock here (:class:`hookbus.engine.checkpoint.run_lock.RunLock`); ``train()``
        releases it when it returns or raises.

        Called again after a ``train()`` (``train()`` does), it starts from the run's
        resume point again, as a new process would: the counters go back to a fresh
        start and the newest checkpoint in ``checkpoint.dir`` is restored; the model
        and optimizer are the same objects (what ignite handlers attached to them, such
        as ``FastaiLRFinder``, put back is kept where no checkpoint is restored), and
        the data loaders are built again.
        """
        if self._start is not None:
            return self.state
        state = self.state
        self._setup_machine()
        if state.base_model is None:
            prepare_task(state, self.cfg, self.parts)
            self._meters = list(state.meters)
        else:  # a train() ran: its data loaders were released, its counters moved on
            state.data_loaders = build_data_loaders(
                self.cfg,
                rank=state.rank,
                world_size=state.world_size,
                datasets=self.parts.datasets(self.cfg),
            )
        state.start_over()
        train_len = len(state.data_loaders["train"])
        test_len = len(state.data_loaders["test"])
        phases = build_phase_plan(self.cfg, train_length=train_len, test_length=test_len)
        state.take_plan(phases, epoch_length=train_len)
        if state.rank == 0 and self._lock is None:
            self._lock = RunLock.acquire(state.run_dir)
        self._start = self._restore()
        self._resume_iteration = state.iteration
        state.epoch = state.train_phase_idx + 1
        return state

    def train(self) -> RunState:
        """Run the whole plan; returns the run state. Exceptions propagate after the
        ``EXCEPTION_RAISED`` and ``on_exception`` handlers.

        The process settings the run applies (``machine.*``: flush-denormal, threads,
        deterministic algorithms) are put back as they were when it returns or raises.
        Called from Python, it shows the log lines on standard output unless logging is
        configured (see :mod:`hookbus.console`).
        """
        state = self.state
        try:
            with console_unless_configured(), PreemptionGuard(state):
                return self._train()
        except (Exception, KeyboardInterrupt) as exc:
            self._handle_exception(exc)
            raise
        finally:
            self._end_sweep()
            self._release_data()
            self._start = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            if self._settings_before is not None:
                restore_settings(self._settings_before)
                self._settings_before = None

    def _train(self) -> RunState:
        """Set up, then run the remaining phases."""
        state, engine = self.state, self.engine
        self.setup()
        start = self._start
        assert start is not None
        self._check_loaded_counters()
        engine.keep_metrics_apart()
        if start.stopped_by and not self.cfg.trainer.resume_stopped:
            state.stopped_by = start.stopped_by
            logger.warning(
                "training already complete: the run in %s was stopped early by %s and counts "
                "as finished, nothing to train; to go on from its last checkpoint, run again "
                "with trainer.resume_stopped=true",
                state.run_dir,
                start.stopped_by,
            )
            return state
        finished = start.phase_idx >= len(state.phases)
        if finished and not end_work_owed(state.run_dir):
            logger.warning(
                "training already complete: %s holds the final checkpoint (phase %d of %d), "
                "nothing to train. To train longer, raise optimizer.num_epochs with "
                "checkpoint.change_finished=true (the run goes on from that checkpoint); to "
                "start afresh, set checkpoint.dir to a new directory",
                state.run_dir,
                state.phase_idx + 1,
                len(state.phases),
            )
            return state
        end_work = hook_plan(engine)[SSLEvents.ON_END.value]
        if finished:
            logger.warning(
                "training complete: %s holds the final checkpoint, but the run was stopped "
                "before its end-of-run work (%s) finished: doing it now",
                state.run_dir,
                ", ".join(end_work),
            )
        if state.rank == 0:
            self._write_config()
            owe_end_work(state.run_dir, end_work)
        engine.should_terminate = engine.should_terminate_single_epoch = False
        started = time.perf_counter()
        engine.fire_event(SSLEvents.ON_START)
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
        sweep = _lr_finder(engine)
        if sweep is not None:
            self._begin_sweep(sweep)
        engine.fire_event(Events.STARTED)
        ended = self._run_phases(start)
        if ended is PhaseEnd.PREEMPTED:
            stop = InterruptedRun if state.stop_requested == CTRL_C else PreemptedError
            raise stop(preempted_line(state))
        if ended is PhaseEnd.STOPPED:
            if sweep is None:
                logger.warning("%s", stop_line(state))
                state.summary["stopped"] = stop_line(state)
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
        logger.info(
            "end-of-run work: %s (a stop now leaves it to a rerun of the same command)",
            ", ".join(end_work),
        )
        engine.fire_event(SSLEvents.ON_END)
        if state.rank == 0:
            settle_end_work(state.run_dir)
        return state

    def _check_loaded_counters(self) -> None:
        """Refuse ignite's way of resuming: counters loaded into the engine
        (``Checkpoint.load_objects({"trainer": engine, ...})``, ``engine.load_state_dict``)
        that are not where hookbus's own resume puts the run."""
        loaded = self.engine.take_loaded_counters()
        state = self.state
        if loaded is None:
            return
        if loaded == self._resume_iteration:  # the plan's sizes, not the loaded ones
            state.take_plan(state.phases, epoch_length=len(state.data_loaders["train"]))
            return
        where = (
            f"the checkpoint {self.state.resumed_from} at iteration {self._resume_iteration}"
            if self.state.resumed_from
            else "a fresh start (no checkpoint in it)"
        )
        raise ConfigError(
            f"the engine's counters were loaded at train iteration {loaded} "
            "(Checkpoint.load_objects with 'trainer', or engine.load_state_dict), but "
            f"hookbus resumes {self.state.run_dir} from {where}: hookbus resumes a run from "
            "its own checkpoints (checkpoint.auto_resume: run again on the same "
            "checkpoint.dir; they carry the counters, RNG, meters and hook states an exact "
            "continuation needs). Load only the model and optimizer with load_objects, "
            "without 'trainer', for a warm start; nothing was trained"
        )

    def _begin_sweep(self, finder: FastaiLRFinder) -> None:
        """A ``train()`` with ignite's ``FastaiLRFinder`` attached is its sweep: the
        finder sets the learning rate, and the hooks that record the run (checkpoints,
        ``metrics.json``) are set aside until it ends, so the sweep's weights are never
        taken for the run's."""
        self._set_aside = [
            hook for hook in self.hooks if isinstance(hook, CheckpointHook | MetricsJsonHook)
        ]
        for hook in self._set_aside:
            hook.detach(self.engine)
        self.state.lr_scheduler = type(finder).__name__
        logger.info(
            "learning-rate sweep by %s: it sets the learning rate; no checkpoint and no "
            "metrics.json line is written until it ends (%s set aside)",
            type(finder).__name__,
            ", ".join(hook.name for hook in self._set_aside) or "no hook",
        )

    def _end_sweep(self) -> None:
        for hook in self._set_aside:
            hook.attach(self.engine)
        self._set_aside = []

    def _write_config(self) -> None:
        path = self.state.run_dir / "config.yaml"
        try:
            write_text_atomic(path, config_to_yaml(self.cfg))
        except OSError as exc:
            raise CheckpointWriteError(
                f"cannot write {path}: {exc.strerror or exc}; nothing was trained"
            ) from exc

    def _setup_machine(self) -> None:
        state, cfg = self.state, self.cfg
        distributed.init_from_environment(cfg)
        state.rank = distributed.rank()
        state.world_size = distributed.world_size()
        state.device = distributed.select_device(cfg)
        if state.world_size > 1:
            logger.info(
                "rank %d of %d; data.batch_size %d per process, %d in all",
                state.rank,
                state.world_size,
                cfg.data.batch_size,
                cfg.data.batch_size * state.world_size,
            )
        self._settings_before = configure_process(cfg)

    def _restore(self) -> ResumePoint:
        """Restore the newest checkpoint when auto-resume is on; returns where to start."""
        state = self.state
        if state.rank == 0:
            for stale in remove_stale_temporaries(state.run_dir):
                logger.warning("removed %s, left by an interrupted write", stale)
        found = (
            newest_valid_checkpoint(state.run_dir, check=resume_check(state))
            if self.cfg.checkpoint.auto_resume
            else None
        )
        if found is None:
            return ResumePoint(0)
        path, checkpoint = found
        return restore_training_state(state, checkpoint, str(path))

    def _run_phases(self, start: ResumePoint) -> PhaseEnd:
        """Run the phases from ``start`` on; returns how the last one that ran ended
        (:attr:`PhaseEnd.STOPPED` also for a stop asked before a phase began)."""
        state = self.state
        for phase_idx in range(start.phase_idx, len(state.phases)):
            if self._boundary(agreed_stops(self.engine)) is PhaseEnd.STOPPED:
                return PhaseEnd.STOPPED
            continuing = start.mid_phase and phase_idx == start.phase_idx
            ended = self._run_phase(phase_idx, start.batches_done if continuing else None)
            if not ended.goes_on:
                return ended
        return self._boundary(agreed_stops(self.engine)) or PhaseEnd.COMPLETED

    def _boundary(self, stops: Stops, *, after_step: bool = False) -> PhaseEnd | None:
        """The check at every boundary of the loop: how the phase ends here by the stops
        every rank agreed on (None: it goes on). Between phases only ``terminate()``
        counts; after a step also a preemption and ``terminate_epoch()``. A stop asked
        after the agreement (in ``on_step``) is agreed at the next boundary; one process
        honours it at once."""
        engine = self.engine
        alone = self.state.world_size == 1
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

    def _run_phase(self, phase_idx: int, batches_done: int | None) -> PhaseEnd:
        """Run phase ``phase_idx``; returns how it ended. ``batches_done`` is None for a
        fresh phase, or the batches a checkpoint taken inside it had done (its meters
        and loss sum are then the restored ones, and those batches are skipped)."""
        engine, state = self.engine, self.state
        phase = state.begin_phase(phase_idx, self._meters, batches_done=batches_done)
        loader = state.data_loaders["train" if phase.train else "test"]
        set_loader_epoch(loader, phase_idx)
        if batches_done is not None:
            loader.sampler.set_start(batches_done * loader.batch_size)
        state.dataloader = loader
        state.model.train(phase.train)
        for meter in state.meters:
            meter.prepare(state.base_model, state.data_loaders, state.device)
        self._phase_started = time.perf_counter()
        engine.fire_event(SSLEvents.ON_PHASE_START)
        if phase.train:
            state.epoch = state.train_phase_idx + 1
            engine.fire_event(Events.EPOCH_STARTED)
        if self._boundary(agreed_stops(engine)) is PhaseEnd.STOPPED:
            return PhaseEnd.STOPPED
        self._phase_end = self._run_steps(phase.train, loader)
        if not self._phase_end.goes_on:
            return self._phase_end
        distributed.barrier()
        engine.fire_event(SSLEvents.ON_PHASE_END)
        state.end_phase()
        return self._phase_end

    def _run_steps(self, train: bool, loader: Any) -> PhaseEnd:
        """The steps of one phase, with ignite's per-step events in train phases;
        returns how the phase ended. A phase that goes on drops its data iterator; a
        stop leaves it to :meth:`_release_data`, which shuts its workers down."""
        engine, state = self.engine, self.state
        self._iterator = iter(loader)
        clock = time.perf_counter
        ended = PhaseEnd.COMPLETED
        while True:
            started = clock()
            if train and state.batches < state.phase_length:
                engine.fire_event(Events.GET_BATCH_STARTED)
            try:
                batch = next(self._iterator)
            except StopIteration:
                break
            fetched = clock()
            state.batch = self._finish_views(batch)
            state.output = None
            if train:
                engine.fire_event(Events.GET_BATCH_COMPLETED)
            state.begin_step()
            if train:
                engine.fire_event(Events.ITERATION_STARTED)
            output = self.train_step(engine, state.batch)
            state.end_step(output, batch_time=clock() - started, data_time=fetched - started)
            if train:
                engine.fire_event(Events.ITERATION_COMPLETED)
            stops = agreed_stops(engine)
            engine.fire_event(SSLEvents.ON_STEP)
            ended = self._boundary(stops, after_step=True) or PhaseEnd.COMPLETED
            if ended is not PhaseEnd.COMPLETED:
                break
        if ended in (PhaseEnd.ENDED_EARLY, PhaseEnd.ENDED_EARLY_QUIETLY):
            self._end_phase_early()
        if ended.goes_on:
            self._iterator = None
        return ended

    def _finish_views(self, batch: Any) -> Any:
        """The batch with its color augmentations done on the training device when
        ``data.augment_device`` asks for it (the loader then delivers uint8 crops and
        their parameters), before any step or handler sees it."""
        if self.cfg.data.augment_device == "cpu" or not isinstance(batch, dict):
            return batch
        augment = self.cfg.data.torchvision
        return finish_views(batch, self.state.device, augment.mean, augment.std)

    def _end_phase_early(self) -> None:
        """Honour ``terminate_epoch()``: the phase ends after this step."""
        engine, state = self.engine, self.state
        engine.should_terminate_single_epoch = False
        logger.info(
            "%s ended early by terminate_epoch() after %d of %d steps",
            phase_label(state.phase_idx, len(state.phases)),
            state.batches,
            state.phase_length,
        )
        engine._fire_event(Events.TERMINATE_SINGLE_EPOCH, iter_counter=state.batches)

    def _fire_epoch_completed(self, engine: Engine) -> None:
        """ignite's ``EPOCH_COMPLETED`` at the end of a train phase, inside
        ``on_phase_end`` after the meter sync, so that ignite's handlers see the synced
        meters and hookbus's reports see what ignite's metrics computed; not after
        ``terminate_epoch(skip_epoch_completed=True)``. ``last_event_name`` is kept for
        the ``on_phase_end`` handlers after it."""
        state = self.state
        if not state.train or self._phase_end is PhaseEnd.ENDED_EARLY_QUIETLY:
            return
        state.times[Events.EPOCH_COMPLETED.name] = time.perf_counter() - self._phase_started
        outer = engine.last_event_name
        engine.fire_event(Events.EPOCH_COMPLETED)
        engine.last_event_name = outer

    def _handle_exception(self, exc: BaseException) -> None:
        """Run ignite's ``EXCEPTION_RAISED`` handlers (with the exception), then every
        on_exception handler; a failing handler is logged, not raised, and the
        exception is never swallowed (the caller re-raises it)."""
        engine, state = self.engine, self.state
        state.exception = exc
        if engine._event_handlers.get(Events.EXCEPTION_RAISED):
            try:
                engine._fire_event(Events.EXCEPTION_RAISED, exc)
            except Exception:
                logger.exception("an EXCEPTION_RAISED handler failed while handling %r", exc)
        for handler in engine.handlers(SSLEvents.ON_EXCEPTION):
            try:
                handler(engine)
            except Exception:
                logger.exception("an on_exception handler failed while handling %r", exc)

    def _release_data(self) -> None:
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self.state.release_data()


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


def preempted_line(state: RunState) -> str:
    """One line on a run stopped by a preemption signal after its step's checkpoint:
    by what, where, and how to go on."""
    return (
        f"stopped by {state.stop_requested} in "
        f"{phase_label(state.phase_idx, len(state.phases))} after step {state.batches} "
        f"(train iteration {state.iteration}); run the same command again to resume"
    )


def _check_hooks(hooks: Sequence[Any]) -> None:
    for index, hook in enumerate(hooks):
        if not isinstance(hook, Hook):
            raise TypeError(
                f"hooks[{index}] is {hook!r}, not a hookbus Hook: pass an instance of a Hook "
                "subclass (MyHook(), with on_step and the like as methods), or add a plain "
                "function as an ignite handler: trainer.engine.add_event_handler("
                "SSLEvents.ON_STEP, function)"
            )
    names = [hook.name for hook in hooks]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"hook names must be unique; repeated: {duplicates}")


def _lr_finder(engine: Engine) -> FastaiLRFinder | None:
    """The ``FastaiLRFinder`` whose sweep this run is (its ``attach`` block), or None."""
    for stored, _, _ in engine._event_handlers.get(Events.STARTED, ()):
        owner = getattr(stored, "__self__", None)
        if isinstance(owner, FastaiLRFinder):
            return owner
    return None

"""SSLTrainer: VISSL's train workflow as a phase loop firing events on an ignite Engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ignite.engine import Events
from torch import nn
from torch.utils.data import Dataset

from hookbus.config import Config
from hookbus.console import console_unless_configured
from hookbus.engine.bus.bus_engine import BusEngine
from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.handler_order import hook_plan
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.phases import PhaseEnd, build_phase_plan
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.end_of_run import owe_end_work, settle_end_work
from hookbus.engine.checkpoint.run_lock import RunLock, check_run_dir
from hookbus.engine.checkpoint.training_state import ResumePoint
from hookbus.engine.config.imports import import_user_modules
from hookbus.engine.errors import ConfigError
from hookbus.engine.process import distributed
from hookbus.engine.process.distributed import check_device
from hookbus.engine.process.machine import ProcessSettings, restore_settings
from hookbus.engine.process.preemption import PreemptionGuard, agreed_stops
from hookbus.engine.registry import UnknownNameError
from hookbus.hook_set import default_hooks
from hookbus.ignite_compat import IgniteCompat
from hookbus.parts.data import build_data_loaders, finish_views, set_loader_epoch
from hookbus.parts.python_parts import OptimizerFactory, PythonParts, initial_copy
from hookbus.parts.task import check_component_names, check_options_are_read, prepare_task
from hookbus.run_start import (
    check_hooks,
    nothing_left,
    restore_newest,
    setup_machine,
    write_effective_config,
)
from hookbus.steps import get_train_step
from hookbus.stops import phase_end_at, stop_error, stop_line

logger = logging.getLogger("hookbus")


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
        check_hooks(self.hooks)
        self.engine = BusEngine(self.train_step)
        self.engine.state = RunState(cfg=cfg, run_dir=Path(cfg.checkpoint.dir), hooks=self.hooks)
        if backbone is not None and cfg.hooks.evaluation_report.enabled:
            self.engine.state.initial_backbone = initial_copy(backbone)
        self.ignite = IgniteCompat(self.engine, self.hooks)
        for hook in self.hooks:
            hook.attach(self.engine)
        self._iterator: Any = None
        self._meters: list[Any] = []
        self._settings_before: ProcessSettings | None = None
        self._start: ResumePoint | None = None
        self._lock: RunLock | None = None
        self._resume_iteration = 0

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
        self._settings_before = setup_machine(state, self.cfg)
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
        self._start = restore_newest(state, self.cfg)
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
            self.ignite.close()
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
        self.ignite.check_loaded_counters(self._resume_iteration)
        engine.keep_metrics_apart()
        end_work = hook_plan(engine)[SSLEvents.ON_END.value]
        if nothing_left(state, start, self.cfg, end_work):
            return state
        if state.rank == 0:
            write_effective_config(state, self.cfg)
            owe_end_work(state.run_dir, end_work)
        engine.should_terminate = engine.should_terminate_single_epoch = False
        started = time.perf_counter()
        engine.fire_event(SSLEvents.ON_START)
        self.ignite.start()
        ended = self._run_phases(start)
        if ended is PhaseEnd.PREEMPTED:
            raise stop_error(state)
        self.ignite.finish(ended, started, stop_line(state))
        logger.info(
            "end-of-run work: %s (a stop now leaves it to a rerun of the same command)",
            ", ".join(end_work),
        )
        engine.fire_event(SSLEvents.ON_END)
        if state.rank == 0:
            settle_end_work(state.run_dir)
        return state

    def _run_phases(self, start: ResumePoint) -> PhaseEnd:
        """Run the phases from ``start`` on; returns how the last one that ran ended
        (:attr:`PhaseEnd.STOPPED` also for a stop asked before a phase began)."""
        state = self.state
        for phase_idx in range(start.phase_idx, len(state.phases)):
            if phase_end_at(self.engine) is PhaseEnd.STOPPED:
                return PhaseEnd.STOPPED
            continuing = start.mid_phase and phase_idx == start.phase_idx
            ended = self._run_phase(phase_idx, start.batches_done if continuing else None)
            if not ended.goes_on:
                return ended
        return phase_end_at(self.engine) or PhaseEnd.COMPLETED

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
        self.ignite.begin_phase()
        engine.fire_event(SSLEvents.ON_PHASE_START)
        if phase.train:
            state.epoch = state.train_phase_idx + 1
        self.ignite.fire(Events.EPOCH_STARTED)
        if phase_end_at(engine) is PhaseEnd.STOPPED:
            return PhaseEnd.STOPPED
        ended = self._run_steps(loader)
        if not ended.goes_on:
            return ended
        distributed.barrier()
        engine.fire_event(SSLEvents.ON_PHASE_END)
        state.end_phase()
        return ended

    def _run_steps(self, loader: Any) -> PhaseEnd:
        """The steps of one phase, with ignite's per-step events in train phases;
        returns how the phase ended. A phase that goes on drops its data iterator; a
        stop leaves it to :meth:`_release_data`, which shuts its workers down."""
        engine, state, ignite = self.engine, self.state, self.ignite
        self._iterator = iter(loader)
        clock = time.perf_counter
        ended = PhaseEnd.COMPLETED
        while True:
            started = clock()
            if state.batches < state.phase_length:
                ignite.fire(Events.GET_BATCH_STARTED)
            try:
                batch = next(self._iterator)
            except StopIteration:
                break
            fetched = clock()
            state.batch = self._finish_views(batch)
            state.output = None
            ignite.fire(Events.GET_BATCH_COMPLETED)
            state.begin_step()
            ignite.fire(Events.ITERATION_STARTED)
            output = self.train_step(engine, state.batch)
            state.end_step(output, batch_time=clock() - started, data_time=fetched - started)
            ignite.fire(Events.ITERATION_COMPLETED)
            stops = agreed_stops(engine)
            engine.fire_event(SSLEvents.ON_STEP)
            ended = phase_end_at(engine, stops, after_step=True) or PhaseEnd.COMPLETED
            if ended is not PhaseEnd.COMPLETED:
                break
        if ended in (PhaseEnd.ENDED_EARLY, PhaseEnd.ENDED_EARLY_QUIETLY):
            ignite.phase_ended_early(quietly=ended is PhaseEnd.ENDED_EARLY_QUIETLY)
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

    def _handle_exception(self, exc: BaseException) -> None:
        """Run ignite's ``EXCEPTION_RAISED`` handlers (with the exception), then every
        on_exception handler; a failing handler is logged, not raised, and the
        exception is never swallowed (the caller re-raises it)."""
        engine, state = self.engine, self.state
        state.exception = exc
        self.ignite.exception(exc)
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

"""SSLTrainer: VISSL's train workflow as a phase loop firing events on an ignite Engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hookbus.engine import distributed
from hookbus.engine.bus import BusEngine, hook_plan
from hookbus.engine.checkpoint_io import (
    newest_valid_checkpoint,
    remove_stale_temporaries,
    write_text_atomic,
)
from hookbus.engine.config import Config
from hookbus.engine.config_io import config_to_yaml
from hookbus.engine.errors import ConfigError
from hookbus.engine.events import SSLEvents
from hookbus.engine.hook import Hook
from hookbus.engine.imports import import_user_modules
from hookbus.engine.machine import ProcessSettings, configure_process, restore_settings
from hookbus.engine.phases import build_phase_plan
from hookbus.engine.preemption import PreemptedError, PreemptionGuard, stop_agreed
from hookbus.engine.registry import UnknownNameError
from hookbus.engine.state import RunState
from hookbus.engine.training_state import ResumePoint, restore_training_state
from hookbus.hooks.defaults import default_hooks
from hookbus.parts.data import set_loader_epoch
from hookbus.parts.task import check_component_names, prepare_task
from hookbus.steps import get_train_step

logger = logging.getLogger("hookbus")


class SSLTrainer:
    """Runs train and test phases on :attr:`engine`, an ignite ``Engine`` used as the bus.

    ``train()`` follows VISSL's trainer: the train step is looked up by name
    (``trainer.train_step_name``), the task is prepared (data, model, loss, optimizer,
    meters), the model is wrapped for DDP when distributed, the training state is restored
    from the newest checkpoint, then the phases run (see
    :func:`hookbus.engine.phases.build_phase_plan`).
    Every step updates ``iteration`` (train steps), ``local_iteration_num`` (all steps),
    ``batches`` and ``batch_time`` on the run state. A barrier is passed before
    ``on_phase_end``, whose first handler (the meter-sync hook) syncs the meters. Any
    exception runs the ``on_exception`` handlers and then reaches the caller.

    Args:
        cfg: the validated config.
        hooks: the hooks to attach; None means :func:`hookbus.default_hooks` (cfg), a list
            means exactly those.

    Example::

        cfg = load_config("configs/simclr_digits.yaml", ["optimizer.num_epochs=2"])
        trainer = SSLTrainer(cfg, hooks=[*default_hooks(cfg), MyHook()])
        trainer.train()
    """

    def __init__(self, cfg: Config, hooks: Sequence[Hook] | None = None) -> None:
        import_user_modules(cfg.trainer.imports)
        check_component_names(cfg)
        try:
            self.train_step = get_train_step(cfg.trainer.train_step_name)
        except UnknownNameError as exc:
            raise ConfigError(f"trainer.train_step_name: {exc}") from None
        self.cfg = cfg
        self.hooks: list[Hook] = list(default_hooks(cfg) if hooks is None else hooks)
        names = [hook.name for hook in self.hooks]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"hook names must be unique; repeated: {duplicates}")
        self.engine = BusEngine(self.train_step)
        self.engine.state = RunState(cfg=cfg, run_dir=Path(cfg.checkpoint.dir), hooks=self.hooks)
        for hook in self.hooks:
            hook.attach(self.engine)
        self._iterator: Any = None
        self._meters: list[Any] = []
        self._settings_before: ProcessSettings | None = None

    @property
    def state(self) -> RunState:
        """The run state (``engine.state``)."""
        return self.engine.state

    def hook_plan(self) -> dict[str, list[str]]:
        """For each event, the names of its handlers in the order they run."""
        return hook_plan(self.engine)

    def train(self) -> Any:
        """Run the whole plan; returns the run state. Exceptions propagate after on_exception.

        The process settings the run applies (``machine.*``: flush-denormal, threads,
        deterministic algorithms) are put back as they were when it returns or raises.
        """
        state = self.state
        try:
            with PreemptionGuard(state):
                return self._train()
        except (Exception, KeyboardInterrupt) as exc:
            self._handle_exception(exc)
            raise
        finally:
            self._release_data()
            if self._settings_before is not None:
                restore_settings(self._settings_before)
                self._settings_before = None

    def _train(self) -> Any:
        """Prepare, restore, and run the remaining phases."""
        state = self.state
        self._setup_machine()
        prepare_task(state, self.cfg)
        self._meters = list(state.meters)
        train_len = len(state.data_loaders["train"])
        test_len = len(state.data_loaders["test"])
        state.phases = build_phase_plan(self.cfg, train_length=train_len, test_length=test_len)
        state.max_iterations = sum(p.length for p in state.phases if p.train)
        start = self._restore()
        if start.phase_idx >= len(state.phases):
            logger.info(
                "training already complete: %s holds the final checkpoint (phase %d of %d)",
                state.run_dir,
                state.phase_idx + 1,
                len(state.phases),
            )
            return state
        if state.rank == 0:
            write_text_atomic(state.run_dir / "config.yaml", config_to_yaml(self.cfg))
        self.engine.fire_event(SSLEvents.ON_START)
        for phase_idx in range(start.phase_idx, len(state.phases)):
            continuing = start.mid_phase and phase_idx == start.phase_idx
            self._run_phase(phase_idx, start.batches_done if continuing else None)
        self.engine.fire_event(SSLEvents.ON_END)
        return state

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
        found = newest_valid_checkpoint(state.run_dir) if self.cfg.checkpoint.auto_resume else None
        if found is None:
            return ResumePoint(0)
        path, checkpoint = found
        return restore_training_state(state, checkpoint, str(path))

    def _run_phase(self, phase_idx: int, batches_done: int | None) -> None:
        """Run phase ``phase_idx``; ``batches_done`` is None for a fresh phase, or the
        batches a checkpoint taken inside it had done (its meters and loss sum are then
        the restored ones, and those batches are skipped)."""
        engine, state = self.engine, self.state
        phase = state.phases[phase_idx]
        fresh = batches_done is None
        state.phase_idx = phase_idx
        state.train = phase.train
        state.phase_name = phase.kind
        if phase.train and fresh:
            state.train_phase_idx += 1
        loader = state.data_loaders["train" if phase.train else "test"]
        set_loader_epoch(loader, phase_idx)
        if not fresh:
            loader.sampler.set_start(batches_done * loader.batch_size)
        state.phase_length = phase.length
        state.batches = batches_done or 0
        state.batch_time = []
        state.data_time = []
        state.meters = [meter for meter in self._meters if phase.kind in meter.phases]
        if fresh:
            state.loss_sum = None
            for meter in state.meters:
                meter.reset()
        state.model.train(phase.train)
        for meter in state.meters:
            meter.prepare(state.base_model, state.data_loaders, state.device)
        engine.fire_event(SSLEvents.ON_PHASE_START)

        self._iterator = iter(loader)
        clock = time.perf_counter
        while True:
            started = clock()
            try:
                batch = next(self._iterator)
            except StopIteration:
                break
            fetched = clock()
            self.train_step(engine, batch)
            if phase.train:
                state.iteration += 1
            state.local_iteration_num += 1
            state.batches += 1
            finished = clock()
            state.batch_time.append(finished - started)
            state.data_time.append(fetched - started)
            stopping = stop_agreed(state)
            engine.fire_event(SSLEvents.ON_STEP)
            if stopping:
                raise PreemptedError(
                    f"stopped by {state.stop_requested} after phase {phase_idx} step "
                    f"{state.batches} (train iteration {state.iteration}); run the same "
                    "command again to resume"
                )
        self._iterator = None
        distributed.barrier()
        engine.fire_event(SSLEvents.ON_PHASE_END)

    def _handle_exception(self, exc: BaseException) -> None:
        """Run every on_exception handler; a failing handler is logged, not raised."""
        state = self.state
        state.exception = exc
        for handler in self.engine.handlers(SSLEvents.ON_EXCEPTION):
            try:
                handler(self.engine)
            except Exception:
                logger.exception("an on_exception handler failed while handling %r", exc)

    def _release_data(self) -> None:
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self.state.data_loaders = {}
        self.state.last_batch = None

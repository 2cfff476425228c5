"""Starting a run: the process's machine, the newest checkpoint, the effective config,
the hooks given, and whether anything is left to train. The trainer calls these from
``setup()`` and ``train()``, in that order."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from hookbus.config import Config
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import (
    newest_valid_checkpoint,
    remove_stale_temporaries,
    write_text_atomic,
)
from hookbus.engine.checkpoint.end_of_run import end_work_owed
from hookbus.engine.checkpoint.sharded_checkpoint import resume_check
from hookbus.engine.checkpoint.training_state import ResumePoint, restore_training_state
from hookbus.engine.config.config_io import config_to_yaml
from hookbus.engine.errors import CheckpointWriteError
from hookbus.engine.process import distributed
from hookbus.engine.process.machine import ProcessSettings, configure_process

logger = logging.getLogger("hookbus")


def check_hooks(hooks: Sequence[Any]) -> None:
    """Refuse a hook list holding anything but hookbus hooks, or two of one name."""
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


def setup_machine(state: RunState, cfg: Config) -> ProcessSettings:
    """Join the process group, choose the device, apply ``machine.*``; returns the
    settings before, for the trainer to put back."""
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
    return configure_process(cfg)


def restore_newest(state: RunState, cfg: Config) -> ResumePoint:
    """Restore the newest checkpoint when auto-resume is on; returns where to start."""
    if state.rank == 0:
        for stale in remove_stale_temporaries(state.run_dir):
            logger.warning("removed %s, left by an interrupted write", stale)
    found = (
        newest_valid_checkpoint(state.run_dir, check=resume_check(state))
        if cfg.checkpoint.auto_resume
        else None
    )
    if found is None:
        return ResumePoint(0)
    path, checkpoint = found
    return restore_training_state(state, checkpoint, str(path))


def write_effective_config(state: RunState, cfg: Config) -> None:
    """Write ``config.yaml`` into the run directory (atomically)."""
    path = state.run_dir / "config.yaml"
    try:
        write_text_atomic(path, config_to_yaml(cfg))
    except OSError as exc:
        raise CheckpointWriteError(
            f"cannot write {path}: {exc.strerror or exc}; nothing was trained"
        ) from exc


def nothing_left(state: RunState, start: ResumePoint, cfg: Config, end_work: list[str]) -> bool:
    """True (said in the log) when the run in ``state.run_dir`` is finished: stopped
    early and not asked to go on, or through its last phase with its end-of-run work
    done. A finished run whose end-of-run work (``end_work``) was cut short does it."""
    if start.stopped_by and not cfg.trainer.resume_stopped:
        state.stopped_by = start.stopped_by
        logger.warning(
            "training already complete: the run in %s was stopped early by %s and counts "
            "as finished, nothing to train; to go on from its last checkpoint, run again "
            "with trainer.resume_stopped=true",
            state.run_dir,
            start.stopped_by,
        )
        return True
    if start.phase_idx < len(state.phases):
        return False
    if not end_work_owed(state.run_dir):
        logger.warning(
            "training already complete: %s holds the final checkpoint (phase %d of %d), "
            "nothing to train. To train longer, raise optimizer.num_epochs with "
            "checkpoint.change_finished=true (the run goes on from that checkpoint); to "
            "start afresh, set checkpoint.dir to a new directory",
            state.run_dir,
            state.phase_idx + 1,
            len(state.phases),
        )
        return True
    logger.warning(
        "training complete: %s holds the final checkpoint, but the run was stopped "
        "before its end-of-run work (%s) finished: doing it now",
        state.run_dir,
        ", ".join(end_work),
    )
    return False

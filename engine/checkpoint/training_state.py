"""What a checkpoint carries, taken from the run state and put back into it."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_contents import check_checkpoint_contents
from hookbus.engine.checkpoint.checkpoint_io import FORMAT
from hookbus.engine.config.config_changes import check_finished
from hookbus.engine.errors import ConfigError

logger = logging.getLogger("hookbus")


def collect_training_state(state: RunState, *, phase_done: bool) -> dict[str, Any]:
    """The checkpoint of the run at this point: counters, model, optimizer, hooks, RNGs.

    ``phase_done`` says whether the current phase has finished; when it has not, the
    checkpoint records how many of its batches are done so that a resume skips them.
    """
    phase = state.phases[state.phase_idx]
    return {
        "format": FORMAT,
        "version": 1,
        "phase_idx": state.phase_idx,
        "phase_kind": phase.kind,
        "phase_done": phase_done,
        "phase_batches": state.batches,
        "train_phase_idx": state.train_phase_idx,
        "iteration": state.iteration,
        "iteration_num": state.local_iteration_num,
        "loss_sum": None if state.loss_sum is None else state.loss_sum.detach().cpu(),
        "model": state.base_model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scaler": None if state.scaler is None else state.scaler.state_dict(),
        "loss": state.loss_fn.state_dict(),
        "meters": {meter.name: meter.state_dict() for meter in state.meters},
        "hooks": {hook.name: hook.state_dict() for hook in state.hooks if hook.has_state()},
        "updates": state.updates,
        "stopped_by": state.stopped_by,
        "world_size": state.world_size,
        "rng": _rng_states(),
        "config": state.cfg.model_dump(mode="json"),
    }


@dataclass(frozen=True)
class ResumePoint:
    """Where a run restored from a checkpoint continues."""

    phase_idx: int
    """The phase to run next."""
    batches_done: int = 0
    """Batches of that phase the checkpoint had done; 0 when it starts afresh."""
    mid_phase: bool = False
    """True when the checkpoint was taken inside phase ``phase_idx``: the phase goes on
    with the restored meters and loss sum, and its first ``batches_done`` batches are
    skipped."""
    stopped_by: str | None = None
    """What ended the checkpointed run early with ``engine.terminate()``, or None."""


def restore_training_state(state: RunState, checkpoint: dict[str, Any], source: str) -> ResumePoint:
    """Put ``checkpoint`` back into the run state: the mirror of :func:`collect_training_state`.

    Restores the weights, optimizer, scaler, loss, the hooks' states by name, the
    counters and the RNG states; for a checkpoint taken inside a phase, also the meters
    (by name, among ``state.meters``) and ``loss_sum``. Sets ``state.resumed_from``.
    Returns where to continue. Raises, before restoring anything, :class:`ConfigError`
    when the checkpoint ended a finished run whose config this one changes
    (:func:`hookbus.engine.config.config_changes.check_finished`), when the config changed in a
    way a resumed run cannot take
    (:func:`hookbus.engine.config.config_changes.config_changes`; the changes it applies are
    logged), asks for fewer epochs than the checkpoint has trained, runs on another
    number of processes, or the checkpoint's phase is of another kind than the plan's
    phase of that index, and :class:`CheckpointError` when any section does not fit the
    run (:func:`hookbus.engine.checkpoint.checkpoint_contents.check_checkpoint_contents`: weights,
    optimizer state, RNG and hook states, counters).
    """
    phase_idx = checkpoint["phase_idx"]
    check_finished(checkpoint, state.cfg, source)
    changes = check_checkpoint_contents(state, checkpoint, source)
    if changes:
        logger.info("resuming with config changes: %s", "; ".join(changes))
    _check_phase_kind(state, checkpoint, source)
    state.base_model.load_state_dict(checkpoint["model"])
    state.optimizer.load_state_dict(checkpoint["optimizer"])
    if state.scaler is not None and checkpoint.get("scaler") is not None:
        state.scaler.load_state_dict(checkpoint["scaler"])
    state.loss_fn.load_state_dict(checkpoint.get("loss", {}))
    saved_hooks = checkpoint["hooks"]
    for hook in state.hooks:
        if hook.has_state():
            if hook.name in saved_hooks:
                hook.load_state_dict(saved_hooks[hook.name])
            else:
                logger.warning("checkpoint %s has no state for hook %r", source, hook.name)
    state.phase_idx = phase_idx
    state.train_phase_idx = checkpoint["train_phase_idx"]
    state.iteration = checkpoint["iteration"]
    state.local_iteration_num = checkpoint["iteration_num"]
    state.updates = checkpoint.get("updates", checkpoint["iteration"])
    _set_rng_states(checkpoint.get("rng"))
    state.resumed_from = source
    stopped_by = checkpoint.get("stopped_by")
    if checkpoint.get("phase_done", True):
        return ResumePoint(phase_idx + 1, stopped_by=stopped_by)
    saved_meters = checkpoint.get("meters", {})
    for meter in state.meters:
        if meter.name in saved_meters:
            meter.load_state_dict(saved_meters[meter.name])
    state.loss_sum = checkpoint.get("loss_sum")
    batches = checkpoint.get("phase_batches", 0)
    return ResumePoint(phase_idx, batches, mid_phase=True, stopped_by=stopped_by)


def _check_phase_kind(state: RunState, checkpoint: dict[str, Any], source: str) -> None:
    phase_idx = checkpoint["phase_idx"]
    if phase_idx >= len(state.phases):
        return
    planned = state.phases[phase_idx].kind
    saved = checkpoint.get("phase_kind", planned)
    if saved != planned:
        raise ConfigError(
            f"checkpoint {source} stopped in a {saved} phase, but phase {phase_idx} of this "
            f"config is a {planned} phase; was trainer.test_every_num_epochs or "
            "trainer.test_model changed?"
        )


def _rng_states() -> dict[str, Any]:
    version, mt_state, gauss = random.getstate()
    numpy_state = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    kind, keys, pos, has_gauss, cached = numpy_state
    states: dict[str, Any] = {
        "python": [version, list(mt_state), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict[str, Any] | None) -> None:
    if not states:
        return
    version, mt_state, gauss = states["python"]
    random.setstate((version, tuple(mt_state), gauss))
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])

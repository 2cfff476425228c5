"""Config changes on resume: what may change between a checkpoint and the run that
goes on from it.

A resumed run is compared key by key with the config its checkpoint was trained with
(the checkpoint carries it). A change that is safe is applied and logged: training
longer (``optimizer.num_epochs``), the learning-rate schedule, logging, hooks,
checkpointing, the machine, the data loader's workers. Every other change would break
the run or silently mix two runs (another model, method, optimizer, batch size, data,
augmentation or seed), or would be recorded in ``config.yaml`` but overridden by the
checkpoint (the optimizer's weight decay and momentum live in its restored state): it
is refused, naming each key, before anything is restored. Meters and the test batch
size may change only at a phase boundary. Keys that one of the two configs does not
have (a newer or older hookbus) are left out of the comparison.
"""

from __future__ import annotations

from typing import Any

from hookbus.engine.config import Config
from hookbus.engine.errors import ConfigError

SAFE: tuple[str, ...] = (
    "trainer.log_frequency",
    "trainer.resume_stopped",
    "trainer.imports",
    "trainer.import_paths",
    "data.num_workers",
    "data.pin_memory",
    "data.prefetch_factor",
    "model.amp.",
    "model.channels_last",
    "model.compile.",
    "model.cuda_cache.",
    "optimizer.num_epochs",
    "optimizer.lr",
    "optimizer.final_lr",
    "optimizer.warmup_epochs",
    "optimizer.schedule",
    "optimizer.clip_grad_norm",
    "checkpoint.",
    "hooks.",
    "machine.",
    "distributed.backend",
    "distributed.find_unused_parameters",
    "distributed.timeout_seconds",
    "distributed.init_timeout_seconds",
    "distributed.sync_batch_norm",
)
"""Keys (a trailing dot: whole sections) a resumed run may change at any point."""

SAFE_AT_PHASE_BOUNDARY: tuple[str, ...] = ("meters.", "data.test_batch_size")
"""Keys a resumed run may change when its checkpoint ended a phase, not inside one."""


def flatten(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optimizer.lr": 0.1, ...}`` of a nested config mapping."""
    flat: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(key.startswith(p) if p.endswith(".") else key == p for p in patterns)


def config_changes(
    saved: dict[str, Any] | None, cfg: Config, *, mid_phase: bool, source: str
) -> list[str]:
    """The safe changes from ``saved`` (a checkpoint's config) to ``cfg``, as lines
    ``key: old -> new``; raises :class:`ConfigError` naming every refused change."""
    if not saved:
        return []
    before = flatten(saved)
    after = flatten(cfg.model_dump(mode="json"))
    changed = sorted(key for key in before.keys() & after.keys() if before[key] != after[key])
    safe = SAFE if mid_phase else SAFE + SAFE_AT_PHASE_BOUNDARY
    refused = [key for key in changed if not _matches(key, safe)]
    if refused:
        listed = "; ".join(f"{key}: {before[key]!r} -> {after[key]!r}" for key in refused)
        where = " (it stopped inside a phase)" if mid_phase else ""
        raise ConfigError(
            f"checkpoint {source}{where} was trained with another config, and these keys "
            f"cannot change in a resumed run: {listed}. Set them back, or start afresh in "
            "another checkpoint.dir (or with checkpoint.auto_resume=false)"
        )
    return [f"{key}: {before[key]!r} -> {after[key]!r}" for key in changed]

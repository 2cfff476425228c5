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

Two more checks compare the checkpoint with the run rather than key by key: a run
cannot train fewer epochs than its checkpoint has done (:func:`check_epochs`), and it
goes on with the number of processes its checkpoint was trained with
(:func:`check_world_size`), unless its data's order does not depend on them and the
global batch is kept (:func:`elastic_resume`).
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
    "distributed.nproc_per_node",
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
    saved: dict[str, Any] | None,
    cfg: Config,
    *,
    mid_phase: bool,
    source: str,
    elastic: bool = False,
) -> list[str]:
    """The safe changes from ``saved`` (a checkpoint's config) to ``cfg``, as lines
    ``key: old -> new``; raises :class:`ConfigError` naming every refused change. With
    ``elastic`` (:func:`elastic_resume`: another number of processes, the same global
    batch) ``data.batch_size`` may change too."""
    if not saved:
        return []
    before = flatten(saved)
    after = flatten(cfg.model_dump(mode="json"))
    changed = sorted(key for key in before.keys() & after.keys() if before[key] != after[key])
    safe = SAFE if mid_phase else SAFE + SAFE_AT_PHASE_BOUNDARY
    if elastic:
        safe += ("data.batch_size",)
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


FINISHED_EXEMPT: tuple[str, ...] = ("checkpoint.dir", "checkpoint.change_finished")
"""Keys that may differ in a rerun of a finished run without changing it: where the run
directory is (a moved run), and the flag that allows changes."""


def phase_count(trainer: dict[str, Any], num_epochs: int) -> int:
    """The phases of the plan of a config's ``trainer`` section (as saved in a
    checkpoint) for ``num_epochs``: :func:`hookbus.engine.bus.phases.build_phase_plan`'s
    count."""
    if trainer.get("test_only", False):
        return 1
    tests = num_epochs // max(1, int(trainer.get("test_every_num_epochs", 1)))
    return num_epochs + (tests if trainer.get("test_model", True) else 0)


def check_finished(checkpoint: dict[str, Any], cfg: Config, source: str) -> None:
    """Refuse, with a :class:`ConfigError`, a rerun of a finished run (its checkpoint
    ended the last phase of the config it was trained with) whose config differs from
    that one, naming every changed key and the flag that allows it
    (``checkpoint.change_finished``): a command run again with an override dropped
    must not extend a finished run, nor move the checkpoint later commands read."""
    saved = checkpoint.get("config")
    if not saved or cfg.checkpoint.change_finished or not checkpoint.get("phase_done", True):
        return
    num_epochs = saved.get("optimizer", {}).get("num_epochs")
    if num_epochs is None:
        return
    if checkpoint["phase_idx"] + 1 < phase_count(saved.get("trainer", {}), int(num_epochs)):
        return
    before = flatten(saved)
    after = flatten(cfg.model_dump(mode="json"))
    changed = sorted(
        key
        for key in before.keys() & after.keys()
        if before[key] != after[key] and key not in FINISHED_EXEMPT
    )
    if not changed:
        return
    listed = "; ".join(f"{key}: {before[key]!r} -> {after[key]!r}" for key in changed)
    raise ConfigError(
        f"the run of checkpoint {source} is finished ({num_epochs} epochs), and this config "
        f"differs from the one it was trained with: {listed}. A finished run is not changed "
        "by accident: to go on from it with these changes, run again with "
        "checkpoint.change_finished=true; to keep it, set them back, or train in another "
        "checkpoint.dir"
    )


def check_epochs(checkpoint: dict[str, Any], cfg: Config, source: str) -> None:
    """Refuse, with a :class:`ConfigError`, an ``optimizer.num_epochs`` below the epochs
    ``checkpoint`` has trained (the epoch it stopped inside counts): the run cannot undo
    them, and would go on from a phase its plan does not have."""
    done = checkpoint["train_phase_idx"] + 1
    wanted = cfg.optimizer.num_epochs
    if done > wanted and not cfg.trainer.test_only:
        raise ConfigError(
            f"optimizer.num_epochs is {wanted}, but checkpoint {source} has trained {done} "
            f"epochs: a resumed run cannot train fewer. Set optimizer.num_epochs to {done} "
            "or more to go on from it, or train afresh in another checkpoint.dir"
        )


def saved_world_size(checkpoint: dict[str, Any]) -> int:
    """The number of processes that trained ``checkpoint``: recorded in it, or, in a
    checkpoint from before it was, its config's ``distributed.nproc_per_node``."""
    if "world_size" in checkpoint:
        return int(checkpoint["world_size"])
    saved = (checkpoint.get("config") or {}).get("distributed", {})
    return int(saved.get("nproc_per_node", 1))


ELASTIC_DATA: tuple[str, ...] = ("shards",)
"""The ``data.name`` values whose train order is a function of the seed, the epoch and
the global batch, not of the number of ranks (streaming's partition, with a fixed
``data.shards.canonical_nodes``): a checkpoint of such data resumes on another number of
processes that keeps the global batch."""


def elastic_resume(checkpoint: dict[str, Any], cfg: Config, world_size: int) -> bool:
    """Whether ``checkpoint``, trained by another number of processes than the run of
    ``cfg`` on ``world_size``, may go on there: both read data of :data:`ELASTIC_DATA`
    with the same ``data.shards.canonical_nodes``, under DDP (a sharded model resumes on
    other ranks at a phase end only), and keep the global batch (``data.batch_size x
    processes``), so every global batch after the checkpoint holds the same samples."""
    saved = checkpoint.get("config") or {}
    saved_data = saved.get("data", {})
    if cfg.data.name not in ELASTIC_DATA or saved_data.get("name") != cfg.data.name:
        return False
    if (
        cfg.distributed.strategy != "ddp"
        or saved.get("distributed", {}).get("strategy", "ddp") != "ddp"
    ):
        return False
    if saved_data.get("shards", {}).get("canonical_nodes") != cfg.data.shards.canonical_nodes:
        return False
    saved_batch = saved_data.get("batch_size")
    return saved_batch is not None and saved_batch * saved_world_size(checkpoint) == (
        cfg.data.batch_size * world_size
    )


def check_world_size(
    checkpoint: dict[str, Any], cfg: Config, world_size: int, source: str
) -> str | None:
    """Refuse, with a :class:`ConfigError`, to resume ``checkpoint`` with another number
    of processes than trained it, unless :func:`elastic_resume` allows it; returns the
    line to log for such a resume (None for the same number). ``world_size`` is the
    run's own (the process group's, as torchrun, the local launcher or SLURM set it), not
    the config key that asked for it. The global batch, each rank's share of the samples
    and the samples a checkpoint taken inside a phase skips depend on it, so the run
    would not go on as it began."""
    saved = saved_world_size(checkpoint)
    if saved == world_size:
        return None
    if elastic_resume(checkpoint, cfg, world_size):
        batch = cfg.data.batch_size * world_size
        return (
            f"checkpoint {source} was trained by {saved} process{'es' * (saved != 1)}; this "
            f"run goes on with {world_size} and the same global batch of {batch} "
            f"(data.batch_size {cfg.data.batch_size}): the same samples in every global "
            "batch, but BatchNorm statistics and augmentations are drawn per rank's batch, "
            "so the weights are not those of a run that never changed"
        )
    hint = ""
    saved_batch = (checkpoint.get("config") or {}).get("data", {}).get("batch_size")
    if cfg.data.name in ELASTIC_DATA and saved_batch is not None:
        total = saved_batch * saved
        keep = (
            f"data.batch_size={total // world_size}"
            if total % world_size == 0
            else f"a number of processes that divides its global batch of {total}"
        )
        hint = (
            f" (data.name {cfg.data.name} resumes on another number of processes under "
            f"DDP with the same data.shards.canonical_nodes and global batch: {keep})"
        )
    raise ConfigError(
        f"checkpoint {source} was trained by {saved} process{'es' * (saved != 1)}, "
        f"and this run has {world_size}: a resumed run keeps its number of processes"
        f"{hint}. Run it with {saved} in all (distributed.nproc_per_node={saved}, or as "
        "many torchrun ranks), or train afresh in another checkpoint.dir"
    )

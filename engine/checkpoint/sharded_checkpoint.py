"""Sharded checkpoints (``distributed.strategy: fsdp``): every rank writes its shards.

A sharded checkpoint is two things beside each other in the run directory:

- ``phaseNNNNN_batchNNNNNNN.shards/``: every tensor of the model, the optimizer and the
  hooks (a momentum teacher), written by torch.distributed.checkpoint (DCP), each rank
  its own slices in parallel, the tensors every rank holds whole (buffers, step counts)
  by rank 0 alone, and ``shards.sha256`` (:mod:`hookbus.engine.checkpoint.shard_files`);
- ``phaseNNNNN_batchNNNNNNN.torch``: the rest, as in a whole checkpoint (counters, RNG
  states, meters, config), each of those tensors replaced by the string
  :data:`PLACEHOLDER`, and ``"sharded": True``.

The folder is written as ``.NAME.shards.partial`` and renamed once every rank's files and
the checksums are in it; the ``.torch`` file (with its checksum file) and the link
``checkpoint.torch`` follow, as for a whole checkpoint
(:mod:`hookbus.engine.checkpoint.checkpoint_io`):
a crash leaves the previous checkpoint as the newest, never half of one. The next save
removes a ``.partial`` folder left by a killed run.

DCP reads a tensor into whatever slicing the run has: a checkpoint of 2 ranks resumes on
1 or on 4, at a phase boundary (:func:`resume_check`), and ``hookbus export`` reads whole
tensors from it (:func:`load_whole_checkpoint`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import Tensor
from torch.distributed.checkpoint import DefaultSavePlanner, FileSystemWriter

from hookbus.engine.bounded_files import describe_size
from hookbus.engine.checkpoint.checkpoint_contents import check_checkpoint_contents
from hookbus.engine.checkpoint.checkpoint_io import (
    load_verified_checkpoint,
    point_to_newest,
    remove_old,
    save_atomic,
    write_bytes_atomic,
)
from hookbus.engine.checkpoint.shard_files import (
    MANIFEST_NAME,
    DataOnlyReader,
    file_digest,
    manifest_text,
    tensor_bytes,
    tensor_entries,
    verify_shards,
)
from hookbus.engine.errors import CheckpointError, CheckpointWriteError

PLACEHOLDER = "hookbus-shard"
"""What stands in the ``.torch`` file for a tensor kept in the shards."""
SECTIONS = ("model", "optimizer", "hooks")
"""The sections of a checkpoint whose tensors go into the shards."""
SHARDS_SUFFIX = ".shards"
PARTIAL_SUFFIX = ".shards.partial"

logger = logging.getLogger("hookbus")


def shards_folder(path: Path) -> Path:
    """The shards' folder of the checkpoint file ``path`` (links resolved)."""
    real = path.resolve()
    return real.with_name(real.name.removesuffix(".torch") + SHARDS_SUFFIX)


def split_tensors(checkpoint: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``checkpoint`` with every tensor of :data:`SECTIONS` replaced by
    :data:`PLACEHOLDER`, and those tensors by key (``model/backbone.conv.weight``,
    ``optimizer/state/3/exp_avg``)."""
    tensors: dict[str, Tensor] = {}

    def walk(value: Any, key: str) -> Any:
        if isinstance(value, Tensor):
            tensors[key] = value
            return PLACEHOLDER
        if isinstance(value, dict):
            return {name: walk(item, f"{key}/{name}") for name, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{key}/{index}") for index, item in enumerate(value)]
        return value

    skeleton = dict(checkpoint)
    for section in SECTIONS:
        skeleton[section] = walk(checkpoint[section], section)
    return skeleton, tensors


def _placeholders(skeleton: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, str) and value == PLACEHOLDER:
            found.append(key)
        elif isinstance(value, dict):
            for name, item in value.items():
                walk(item, f"{key}/{name}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{key}/{index}")

    for section in SECTIONS:
        walk(skeleton.get(section), section)
    return found


def _fill(skeleton: dict[str, Any], tensors: dict[str, Tensor]) -> None:
    def walk(value: Any, key: str) -> Any:
        if isinstance(value, str) and value == PLACEHOLDER:
            return tensors[key]
        if isinstance(value, dict):
            return {name: walk(item, f"{key}/{name}") for name, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{key}/{index}") for index, item in enumerate(value)]
        return value

    for section in SECTIONS:
        skeleton[section] = walk(skeleton[section], section)


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _agree(error: str | None) -> str | None:
    """The first error of any rank (every rank calls it), or None."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return error
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, error)
    return next((found for found in gathered if found), None)


def save_sharded(checkpoint: dict[str, Any], path: Path, *, keep_last: int) -> None:
    """Write ``checkpoint`` (as
    :func:`~hookbus.engine.checkpoint.training_state.collect_training_state`
    returns it on this rank) as a sharded checkpoint at ``path``, point
    ``checkpoint.torch`` at it and keep the ``keep_last`` newest; every rank calls it.
    Raises :class:`CheckpointWriteError` on every rank when any rank failed to write."""
    directory = path.parent
    partial = directory / f".{path.name.removesuffix('.torch')}{PARTIAL_SUFFIX}"
    error = None
    if _rank() == 0:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for stale in directory.glob(f".*{PARTIAL_SUFFIX}"):
                shutil.rmtree(stale)
            partial.mkdir()
        except OSError as exc:
            error = f"cannot make {partial}: {exc.strerror or exc}"
    _raise_if(_agree(error), path)
    skeleton, tensors = split_tensors(checkpoint)
    try:
        with single_process_quiet():
            dcp.save(
                tensors,
                storage_writer=FileSystemWriter(partial),
                planner=DefaultSavePlanner(dedup_save_to_lowest_rank=True),
            )
        own = {
            file.name: file_digest(file) for file in sorted(partial.glob(f"__{_rank()}_*.distcp"))
        }
    except Exception as exc:  # DCP gathers every rank's error into one exception
        own, error = {}, f"the shards could not be written: {' '.join(str(exc).split())[:300]}"
    _raise_if(_agree(error), path)
    digests: list[Any] = [own]
    if dist.is_initialized() and dist.get_world_size() > 1:
        digests = [None] * dist.get_world_size()
        dist.all_gather_object(digests, own)
    if _rank() == 0:
        error = _finish(partial, path, skeleton, digests, keep_last)
    _raise_if(_agree(error), path)


def _finish(
    partial: Path, path: Path, skeleton: dict[str, Any], digests: list[Any], keep_last: int
) -> str | None:
    """Rank 0's part after the shards are written: the checksums, the renames, the link."""
    listed = {name: digest for share in digests for name, digest in share.items()}
    listed[".metadata"] = file_digest(partial / ".metadata")
    folder = path.with_name(path.name.removesuffix(".torch") + SHARDS_SUFFIX)
    try:
        write_bytes_atomic(partial / MANIFEST_NAME, manifest_text(listed).encode("ascii"))
        _fsync_folder(partial)
        if folder.exists():
            shutil.rmtree(folder)
        partial.rename(folder)
        save_atomic({**skeleton, "sharded": True}, path)
        point_to_newest(path.parent, path.name)
    except OSError as exc:
        return f"{exc.strerror or exc}"
    for removed in remove_old(path.parent, keep_last):
        shutil.rmtree(shards_folder(removed), ignore_errors=True)
    logger.debug("sharded checkpoint written: %s (%d files)", path, len(listed))
    return None


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _raise_if(error: str | None, path: Path) -> None:
    if error is not None:
        raise CheckpointWriteError(
            f"cannot write sharded checkpoint {path}: {error}; the previous checkpoint in "
            f"{path.parent} is the newest"
        )


def load_shards(skeleton: dict[str, Any], path: Path, like: Callable[[str], Tensor | None]) -> None:
    """Verify the shards of the checkpoint file ``path`` and put their tensors into
    ``skeleton`` (its content) in place. A tensor is read into the slicing of ``like(key)``
    when that has its shape and dtype (a ``DTensor``: this rank's slices only), else
    whole. Every rank of a run calls it; :class:`CheckpointError` when a shard is
    missing, corrupt or not a tensor."""
    folder = shards_folder(path)
    verify_shards(folder)
    keys = _placeholders(skeleton)
    entries = tensor_entries(folder, keys)
    targets = {key: like(key) for key in entries}
    whole = {
        key: entry
        for key, entry in entries.items()
        if not _fits(targets[key], torch.Size(entry.size), entry.properties.dtype)
    }
    needed, available = sum(tensor_bytes(entry) for entry in whole.values()), available_memory()
    if needed > available:
        raise CheckpointError(
            f"the shards of {path} need {describe_size(needed)} of memory to read, and "
            f"{describe_size(available)} is available"
        )
    into: dict[str, Tensor] = {}
    for key, entry in entries.items():
        target = targets[key]
        if key in whole:
            into[key] = torch.empty(torch.Size(entry.size), dtype=entry.properties.dtype)
        else:
            assert target is not None
            into[key] = torch.empty_like(target)
    try:
        with single_process_quiet():
            dcp.load(into, storage_reader=DataOnlyReader(folder))
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        raise CheckpointError(f"cannot read the shards of {path}: {text}") from None
    _fill(skeleton, into)


def _fits(target: Tensor | None, shape: torch.Size, dtype: torch.dtype) -> bool:
    return target is not None and target.shape == shape and target.dtype == dtype


def available_memory() -> int:
    """The bytes of memory this machine can give now (``MemAvailable`` on Linux; the
    free pages elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def single_process_quiet() -> Iterator[None]:
    """DCP's ``UserWarning`` that it saves or loads in one process, where no process group
    exists, left out: a one-process run means to, and the line would precede hookbus's
    own (an error, a resume)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "torch.distributed is (disabled, )?unavailable or uninitialized", UserWarning
        )
        yield


def load_whole_checkpoint(path: Path) -> dict[str, Any]:
    """:func:`~hookbus.engine.checkpoint.checkpoint_io.load_verified_checkpoint`, with
    the tensors of a sharded checkpoint read whole from its shards (in one process, as
    ``hookbus export`` reads it)."""
    checkpoint = load_verified_checkpoint(path)
    if checkpoint.get("sharded") is True:
        load_shards(checkpoint, path, lambda key: None)
    return checkpoint


def _live_tensors(state: Any) -> Callable[[str], Tensor | None]:
    """``like`` of :func:`load_shards` for the run of ``state``: the run's own tensor of a
    shard key; for an optimizer state, its parameter; for a hook's tensor named as a
    model's (a momentum teacher's), the model's."""
    model = state.base_model.state_dict()
    _, own = split_tensors(
        {
            "model": model,
            "optimizer": {},
            "hooks": {hook.name: hook.state_dict() for hook in state.hooks if hook.has_state()},
        }
    )
    parameters = [p.detach() for group in state.optimizer.param_groups for p in group["params"]]

    def like(key: str) -> Tensor | None:
        parts = key.split("/")
        if key in own:
            return own[key]
        if parts[:2] == ["optimizer", "state"] and len(parts) == 4 and parts[2].isdigit():
            index = int(parts[2])
            return parameters[index] if index < len(parameters) else None
        if parts[0] == "hooks":
            return model.get(parts[-1])
        return None

    return like


def resume_check(state: Any) -> Any:
    """The ``check`` of :func:`~hookbus.engine.checkpoint.checkpoint_io.newest_valid_checkpoint` for
    the run of ``state``: a sharded checkpoint's tensors are read into the run's slicing
    (:func:`load_shards`, into the checkpoint in place), a change in the number of ranks
    at a phase boundary is taken (the train iteration counted as the new plan counts it,
    logged), then
    :func:`~hookbus.engine.checkpoint.checkpoint_contents.check_checkpoint_contents`."""

    def check(path: Path, checkpoint: dict[str, Any]) -> list[str]:
        if checkpoint.get("sharded") is True:
            load_shards(checkpoint, path, _live_tensors(state))
            _take_world_size(state, checkpoint, str(path))
        return check_checkpoint_contents(state, checkpoint, str(path))

    return check


def _take_world_size(state: Any, checkpoint: dict[str, Any], source: str) -> None:
    saved = checkpoint.get("world_size", 1)
    phase_idx = checkpoint["phase_idx"]
    if saved == state.world_size or not checkpoint.get("phase_done", True):
        return
    if not (type(phase_idx) is int and 0 <= phase_idx < len(state.phases)):
        return  # refused by the contents check
    done = [phase for phase in state.phases[: phase_idx + 1] if phase.train]
    accumulate = state.cfg.optimizer.accumulate_steps
    iteration = sum(phase.length for phase in done)
    logger.warning(
        "sharded checkpoint %s was trained by %d processes and resumes on %d: the global "
        "batch is now %d, and train iteration %s is counted as %d, the new plan's",
        source,
        saved,
        state.world_size,
        state.cfg.data.batch_size * state.world_size,
        checkpoint["iteration"],
        iteration,
    )
    checkpoint["iteration"] = iteration
    checkpoint["updates"] = sum(math.ceil(phase.length / accumulate) for phase in done)
    checkpoint["world_size"] = state.world_size

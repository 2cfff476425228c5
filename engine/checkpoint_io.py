"""Checkpoint files: atomic writes, safe loads, the newest pointer and rotation.

A checkpoint is written to a temporary file in the same folder, flushed and fsynced,
then renamed over its final name, so a crash leaves either the old file or the new one,
never half of one. ``checkpoint.torch`` in the folder is a symbolic link to the newest
checkpoint, replaced atomically after the new file is in place; older files beyond
``keep_last`` are removed only after that.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

from engine.errors import CheckpointError

POINTER_NAME = "checkpoint.torch"
FORMAT = "hookbus-checkpoint"
REQUIRED_KEYS = (
    "phase_idx",
    "train_phase_idx",
    "iteration",
    "iteration_num",
    "model",
    "optimizer",
    "hooks",
)
_NAME = re.compile(r"^phase(\d+)_batch(\d+)\.torch$")


def checkpoint_name(phase_idx: int, batches: int) -> str:
    """File name of the checkpoint taken after ``batches`` steps of phase ``phase_idx``."""
    return f"phase{phase_idx:05d}_batch{batches:07d}.torch"


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` ``obj`` to ``path`` so that readers see all of it or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def point_to_newest(directory: Path, name: str) -> None:
    """Make ``directory/checkpoint.torch`` a link to ``name``, replacing it atomically."""
    link = directory / POINTER_NAME
    tmp = directory / f".{POINTER_NAME}.tmp-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(name, tmp)
    os.replace(tmp, link)
    _fsync_dir(directory)


def list_checkpoints(directory: Path) -> list[Path]:
    """The checkpoint files in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if _NAME.match(p.name)]
    return sorted(found, key=lambda p: p.name)


def remove_old(directory: Path, keep_last: int) -> list[Path]:
    """Delete all but the ``keep_last`` newest checkpoints; the pointer's target stays."""
    pointer = directory / POINTER_NAME
    target = pointer.resolve() if pointer.is_symlink() else None
    removed = []
    for path in list_checkpoints(directory)[:-keep_last]:
        if path.resolve() != target:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def newest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint ``checkpoint.torch`` points to, or None when there is none."""
    pointer = directory / POINTER_NAME
    if pointer.exists():
        return pointer
    if pointer.is_symlink():
        raise CheckpointError(f"{pointer} points to a missing file ({os.readlink(pointer)})")
    return None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True`` (data only, never code) and check it."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a hookbus checkpoint")
    missing = [key for key in REQUIRED_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks the keys {missing}")
    return checkpoint


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Checkpoint files: atomic writes, safe loads, the newest pointer and rotation.

A checkpoint is written to a temporary file in the same folder, flushed and fsynced,
then renamed over its final name, so a crash leaves either the old file or the new one,
never half of one. Its size and SHA-256 go into a sidecar file ``NAME.sha256``, written
the same way just before it: a checkpoint without a matching sidecar is never trusted.
``checkpoint.torch`` in the folder is a symbolic link to the newest checkpoint,
replaced atomically after both files are in place; older files beyond ``keep_last`` are
removed only after that.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hookbus.engine.bounded_files import check_regular, open_regular, read_bounded
from hookbus.engine.checkpoint.run_files import POINTER_NAME, create_temporary, is_temporary_name
from hookbus.engine.errors import CheckpointError, OutputWriteError

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
COUNTER_KEYS = (
    "phase_idx",
    "train_phase_idx",
    "iteration",
    "iteration_num",
    "phase_batches",
    "updates",
)
"""Keys that must hold plain integers: a crafted value of another type is refused."""
CHECKSUM_SUFFIX = ".sha256"
MAX_SIDECAR_BYTES = 4096
"""Largest checksum file read (one is a SHA-256 and a size: about 80 bytes)."""
_NAME = re.compile(r"^phase(\d+)_batch(\d+)\.torch$")

logger = logging.getLogger("hookbus")


def checkpoint_name(phase_idx: int, batches: int) -> str:
    """File name of the checkpoint taken after ``batches`` steps of phase ``phase_idx``."""
    return f"phase{phase_idx:05d}_batch{batches:07d}.torch"


def is_checkpoint_name(name: str) -> bool:
    """Whether ``name`` is a checkpoint file's name (``phaseNNNNN_batchNNNNNNN.torch``)."""
    return _NAME.match(name) is not None


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` ``obj`` to ``path`` with its checksum sidecar, all or nothing.

    The bytes are serialised in memory first, so a pickling error writes nothing;
    ``path.sha256`` (size and SHA-256), then the file, each go through a temporary file,
    fsync and rename. In that order a kill between the two leaves a sidecar without its
    checkpoint, which no resume looks at, and never a checkpoint without its sidecar,
    which a resume would have to refuse as perhaps incomplete (the only one of a run's
    first phase, say).
    """
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    write_bytes_atomic(checksum_path(path), f"{digest} {len(data)}\n".encode())
    write_bytes_atomic(path, data)
    _fsync_dir(path.parent)


def checksum_path(path: Path) -> Path:
    """The sidecar holding ``path``'s SHA-256 and size."""
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def verify_checksum(path: Path) -> None:
    """Raise CheckpointError unless ``path`` matches its sidecar's size and SHA-256.

    Both are read within bounds (:mod:`hookbus.engine.bounded_files`): the sidecar is at
    most :data:`MAX_SIDECAR_BYTES`, the checkpoint a regular file whose size is compared
    before its bytes are streamed through the hash (never held whole in memory).
    """
    sidecar = checksum_path(path.resolve())
    if not os.path.lexists(sidecar):
        raise CheckpointError(
            f"checkpoint {path} has no checksum file {sidecar.name}: it may be incomplete"
        )
    text = read_bounded(sidecar, "checksum file", MAX_SIDECAR_BYTES, error=CheckpointError)
    try:
        digest, size_text = text.decode("ascii").split()
        size = int(size_text)
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"checksum file {sidecar} is malformed") from None
    with open_regular(path, "checkpoint", error=CheckpointError) as handle:
        actual = os.fstat(handle.fileno()).st_size
        if actual != size:
            raise CheckpointError(
                f"checkpoint {path} is {actual} bytes, its checksum file says {size}: truncated"
            )
        try:
            # hashlib.file_digest is Python 3.11's; hookbus runs on 3.10 too.
            hasher = hashlib.sha256()
            for chunk in iter(lambda: handle.read(1 << 18), b""):
                hasher.update(chunk)
            computed = hasher.hexdigest()
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from None
    if computed != digest:
        raise CheckpointError(f"checkpoint {path} does not match its SHA-256: corrupt")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a new temporary file (fsynced, its size checked)
    and a rename; a link at ``path`` is replaced, never written through. On failure the
    temporary file is removed, ``path`` is as it was, and the ``OSError`` propagates."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            written = os.fstat(handle.fileno()).st_size
        if written != len(data):
            raise OSError(errno.EIO, f"{written} of {len(data)} bytes reached the disk")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_output_file(path: Path, data: bytes) -> None:
    """:func:`write_bytes_atomic`, then the folder fsynced, for a file a user asked for
    (an export, a plot, the curves): a failure (a full disk, a read-only folder, a file
    where a folder should be) raises :class:`OutputWriteError` in one line, ``path`` as
    it was and no temporary file left."""
    try:
        write_bytes_atomic(path, data)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise OutputWriteError(
            f"cannot write {path}: {exc.strerror or exc}; it is left as it was"
        ) from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode("utf-8"))


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
            checksum_path(path).unlink(missing_ok=True)
            removed.append(path)
    return removed


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete temporary files that a killed writer left behind; returns them."""
    if not directory.is_dir():
        return []
    stale = [p for p in directory.iterdir() if is_temporary_name(p.name)]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


RESUME_HINT = " (set checkpoint.auto_resume=false or another checkpoint.dir to start afresh)"
"""How a resume with no valid checkpoint starts afresh; the end of that error's line."""


def newest_valid_checkpoint(
    directory: Path,
    check: Callable[[Path, dict[str, Any]], object] | None = None,
    *,
    hint: str = RESUME_HINT,
) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in ``directory`` that loads and verifies, with its content.

    Candidates are the pointer's target, then the other checkpoint files, newest first.
    Each one that fails (missing or wrong checksum, unreadable, not a checkpoint, or
    contents that ``check(path, checkpoint)`` refuses with a CheckpointError: see
    :mod:`hookbus.engine.checkpoint.checkpoint_contents`) is skipped with a warning naming it and
    why. None when no checkpoint file exists; CheckpointError when files exist but none
    is valid, its line ending with ``hint`` (how a resume starts afresh; a command that
    only reads the run, such as ``hookbus export``, gives ``""``).
    """
    pointer = directory / POINTER_NAME
    candidates = list(reversed(list_checkpoints(directory)))
    if pointer.exists():
        target = pointer.resolve()
        if target.parent != directory.resolve():
            logger.warning(
                "%s points outside its directory (%s): ignored; the checkpoints in %s are used",
                pointer,
                target,
                directory,
            )
        else:
            candidates = [target] + [p for p in candidates if p.resolve() != target]
    elif pointer.is_symlink():
        logger.warning("%s points to a missing file (%s)", pointer, os.readlink(pointer))
    problems = []
    for path in candidates:
        try:
            verify_checksum(path)
            checkpoint = load_checkpoint(path)
            if check is not None:
                check(path, checkpoint)
            return path, checkpoint
        except CheckpointError as exc:
            logger.warning("skipping checkpoint %s: %s", path, exc)
            problems.append(str(exc))
    if problems:
        raise CheckpointError(f"no valid checkpoint in {directory}: " + "; ".join(problems) + hint)
    return None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True`` (data only, never code) and check it.

    Only a regular file is opened. Its tensors are mapped from the file (``mmap``, private
    copy-on-write pages) rather than read into memory, so restoring a large checkpoint
    holds one copy of the weights, the model's, beside pages the system can drop.
    """
    check_regular(path, "checkpoint", error=CheckpointError)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: {exc}") from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a hookbus checkpoint")
    missing = [key for key in REQUIRED_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks the keys {missing}")
    for key in COUNTER_KEYS:
        value = checkpoint.get(key)
        if key in checkpoint and (type(value) is not int or value < -1):
            raise CheckpointError(
                f"checkpoint {path}: {key} must be a counter (an int >= -1), "
                f"not {type(value).__name__} {str(value)[:40]!r}"
            )
    for key in ("model", "optimizer", "hooks"):
        if not isinstance(checkpoint[key], dict):
            raise CheckpointError(f"checkpoint {path}: {key} must be a mapping")
    return checkpoint


def load_verified_checkpoint(path: Path) -> dict[str, Any]:
    """:func:`load_checkpoint` after :func:`verify_checksum`: what every reader of a
    hookbus checkpoint given by path uses (export, pretrained weights)."""
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    verify_checksum(path)
    return load_checkpoint(path)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

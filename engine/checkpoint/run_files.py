"""Writing inside a run directory without following links out of it.

A run directory is the user's, and a link in it (``log.txt`` to ``~/.bashrc``,
``tensorboard/`` to another run) must not make hookbus write somewhere else. Links that
stay inside the directory are followed; a file or folder of the run whose path leads
outside it through a symbolic link is refused with :class:`UnsafeRunPath` (a user
error, exit 2), before anything is written. Files replaced through a temporary file and
a rename (checkpoints, ``config.yaml``, ``curves.json``) never write through a link:
the rename replaces the link itself, and the temporary file is created with
``O_EXCL | O_NOFOLLOW``.

An entry whose name hookbus writes but whose kind is wrong (``metrics.json`` or a
leftover ``.NAME.tmp-PID`` that is a folder, ``log.txt`` that is a FIFO, ``tensorboard``
that is a file) is refused by :func:`check_entries` with :class:`UnfitRunEntry`, before
anything is written.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TextIO

from hookbus.engine.errors import UserError

POINTER_NAME = "checkpoint.torch"
"""The link to the newest checkpoint; read with its own rule (it must point inside)."""
PENDING_NAME = "end_of_run.pending"
"""The record that a run's end-of-run work has not finished
(:mod:`hookbus.engine.checkpoint.end_of_run`)."""
RUN_FILE_NAMES = frozenset(
    {
        POINTER_NAME,
        ".hookbus.lock",
        "config.yaml",
        "log.txt",
        "metrics.json",
        "curves.json",
        "curves.png",
        "evaluation.json",
        PENDING_NAME,
    }
)
"""Files that hookbus writes into a run directory by name, beside its checkpoints."""
RUN_FOLDER_NAMES = frozenset({"tensorboard"})
"""Folders that hookbus writes into a run directory."""
_CHECKPOINT_FILE = re.compile(r"^phase\d+_batch\d+\.torch(\.sha256)?$")
"""Checkpoints and their checksum files."""
_TEMPORARY_FILE = re.compile(r"^\..+\.tmp-\d+$")
"""The temporary files of atomic writes (:func:`create_temporary`), which a resumed run
removes as leftovers of a killed writer."""


class UnsafeRunPath(UserError):
    """A path of the run directory leads outside it through a symbolic link."""


class UnfitRunEntry(UserError):
    """An entry of the run directory has a name hookbus writes but the wrong kind."""


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is a temporary file's name of an atomic write (``.NAME.tmp-PID``)."""
    return _TEMPORARY_FILE.match(name) is not None


def inside_run_dir(run_dir: Path, path: Path) -> Path:
    """``path`` with every link resolved; raises :class:`UnsafeRunPath` when that leads
    outside ``run_dir`` (itself resolved, so a run directory that is a link is fine)."""
    root = Path(run_dir).resolve()
    real = Path(path).resolve()
    if real != root and root not in real.parents:
        raise UnsafeRunPath(
            f"{path} leads outside the run directory {root} through a symbolic link (to "
            f"{real}); hookbus does not write through it: remove the link or choose "
            "another checkpoint.dir"
        )
    return real


def check_links(run_dir: Path) -> None:
    """Refuse a run directory holding a symbolic link that leads outside it (the newest
    checkpoint's link excepted: it is only read, and only when it points inside)."""
    if not run_dir.is_dir():
        return
    for entry in sorted(run_dir.iterdir()):
        if entry.is_symlink() and entry.name != POINTER_NAME:
            inside_run_dir(run_dir, entry)


def check_entries(run_dir: Path) -> None:
    """Refuse a run directory holding, by a name hookbus writes, something it cannot
    write or remove there: a folder, FIFO, socket or device where a file goes (a
    leftover temporary file included), or anything but a folder where a folder goes.
    Links are judged by what they lead to (:func:`check_links` judges where)."""
    if not run_dir.is_dir():
        return
    for entry in sorted(run_dir.iterdir()):
        what = _written_as(entry.name)
        if what is None:
            continue
        try:
            mode = entry.stat().st_mode
        except OSError:
            continue  # a dangling link: replaced or refused where it is written
        if stat.S_ISDIR(mode) if what == "a folder" else stat.S_ISREG(mode):
            continue
        raise UnfitRunEntry(
            f"{str(entry)[:300]} is {_kind(mode)}, where hookbus writes {what}: move it out "
            "of the run directory, or choose another checkpoint.dir"
        )


def _written_as(name: str) -> str | None:
    """What hookbus writes by ``name`` in a run directory, or None."""
    if name in RUN_FOLDER_NAMES:
        return "a folder"
    if name in RUN_FILE_NAMES:
        return "a file"
    if _CHECKPOINT_FILE.match(name):
        return "a checkpoint file"
    if is_temporary_name(name):
        return "a temporary file"
    return None


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_append(run_dir: Path, path: Path) -> TextIO:
    """Open ``path`` (inside ``run_dir``) to append text, creating it and its folder;
    a link leading outside ``run_dir`` is refused, and none is followed after the check."""
    real = inside_run_dir(run_dir, path)
    real.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(real, flags, 0o644), "a", encoding="utf-8")


def create_temporary(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path`` for an atomic replace: its name and an open
    descriptor. A leftover of that name is removed first, and so are the temporary files
    of ``path`` that writers no longer running on this machine left (a writer killed
    mid-write: its rerun leaves nothing behind); the file is created with
    ``O_EXCL | O_NOFOLLOW``, so a link planted under the name is never written through."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    remove_dead_temporaries(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return tmp, os.open(tmp, flags, 0o644)


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files of ``path`` (``.NAME.tmp-PID``) whose writer, process
    ``PID``, no longer runs on this machine; returns them. A folder that cannot be listed,
    or a leftover that cannot be removed, is left as it is (the write goes on)."""
    prefix = f".{path.name}.tmp-"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    removed = []
    for name in names:
        pid = name[len(prefix) :]
        if name.startswith(prefix) and pid.isdigit() and not _running(int(pid)):
            leftover = path.parent / name
            try:
                leftover.unlink()
            except OSError:
                continue
            removed.append(leftover)
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True

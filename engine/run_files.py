"""Writing inside a run directory without following links out of it.

A run directory is the user's, and a link in it (``log.txt`` to ``~/.bashrc``,
``tensorboard/`` to another run) must not make hookbus write somewhere else. Links that
stay inside the directory are followed; a file or folder of the run whose path leads
outside it through a symbolic link is refused with :class:`UnsafeRunPath` (a user
error, exit 2), before anything is written. Files replaced through a temporary file and
a rename (checkpoints, ``config.yaml``, ``curves.json``) never write through a link:
the rename replaces the link itself, and the temporary file is created with
``O_EXCL | O_NOFOLLOW``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from hookbus.engine.errors import UserError

POINTER_NAME = "checkpoint.torch"
"""The link to the newest checkpoint; read with its own rule (it must point inside)."""


class UnsafeRunPath(UserError):
    """A path of the run directory leads outside it through a symbolic link."""


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


def open_append(run_dir: Path, path: Path) -> TextIO:
    """Open ``path`` (inside ``run_dir``) to append text, creating it and its folder;
    a link leading outside ``run_dir`` is refused, and none is followed after the check."""
    real = inside_run_dir(run_dir, path)
    real.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(real, flags, 0o644), "a", encoding="utf-8")


def create_temporary(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path`` for an atomic replace: its name and an open
    descriptor. A leftover of that name is removed first; the file is created with
    ``O_EXCL | O_NOFOLLOW``, so a link planted under the name is never written through."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return tmp, os.open(tmp, flags, 0o644)

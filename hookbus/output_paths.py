"""Where a command may write the file it makes (an export, a plot), and how it writes it.

A command's output never replaces one of its inputs or a file that hookbus keeps in a
run directory (checkpoints, their link and checksum files, ``config.yaml``,
``metrics.json``, ``log.txt``, the lock, the curves, the TensorBoard folder), whatever
path leads there: a symbolic link, a hard link, ``..``. :func:`check_destination`
refuses such a destination, or one that is a directory, a FIFO or a device, with one
line (a :class:`~hookbus.engine.errors.UserError`, exit status 2) before anything is
computed. :func:`write_output` then writes it through a temporary file in its folder,
fsynced, its size checked, renamed into place; a write that fails (a full disk, a
read-only folder) leaves nothing behind and is an
:class:`~hookbus.engine.errors.OutputWriteError` (one line, exit status 1).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from hookbus.engine.checkpoint.checkpoint_io import (
    CHECKSUM_SUFFIX,
    is_checkpoint_name,
    write_output_file,
)
from hookbus.engine.checkpoint.run_curves import CURVES_FILE, METRICS_FILE, PLOT_FILE
from hookbus.engine.checkpoint.run_files import PENDING_NAME, POINTER_NAME, is_temporary_name
from hookbus.engine.checkpoint.run_lock import LOCK_NAME
from hookbus.engine.errors import UserError

RUN_FILES = frozenset(
    {
        POINTER_NAME,
        LOCK_NAME,
        METRICS_FILE,
        CURVES_FILE,
        PLOT_FILE,
        "config.yaml",
        "log.txt",
        "evaluation.json",
        PENDING_NAME,
        "tensorboard",
        "eval.json",
        "eval_cache",
        "pictures",
        "report.html",
    }
)
"""Names of the files a run keeps in its directory, beside its checkpoints
(``phaseNNNNN_batchNNNNNNN.torch``), their ``.sha256`` files and temporary files."""
RUN_MARKERS = (POINTER_NAME, LOCK_NAME, "config.yaml", METRICS_FILE, "log.txt")
"""Files whose presence (or that of a checkpoint) makes a folder a run directory."""


def is_run_file_name(name: str) -> bool:
    """Whether ``name`` is one of the files a run keeps in its directory."""
    return (
        name in RUN_FILES
        or name.endswith(CHECKSUM_SUFFIX)
        or is_checkpoint_name(name)
        or is_temporary_name(name)
    )


def is_run_directory(folder: Path) -> bool:
    """Whether ``folder`` holds a run's files (a checkpoint, its link, the lock,
    ``config.yaml``, ``metrics.json`` or ``log.txt``)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(name in RUN_MARKERS or is_checkpoint_name(name) for name in names)


def check_destination(
    destination: Path, sources: Sequence[Path], *, allowed: Sequence[Path] = ()
) -> None:
    """Refuse (:class:`UserError`, naming both paths) a ``destination`` that is one of
    ``sources`` or a file a run keeps in a run directory (``allowed`` excepted: the
    plot command's own ``curves.png``), reached by any path; or one that exists and is
    not a regular file (a directory, a FIFO, a device)."""
    places = {_place(destination), resolved(destination)}
    for source in sources:
        if _same_file(destination, source) or resolved(source) in places:
            raise UserError(
                f"{destination} is the input file {source}: writing it would destroy the "
                "input; give another output path"
            )
    if not any(_same_file(destination, path) or _place(path) in places for path in allowed):
        _refuse_run_files(destination, places, sources)
    try:
        mode = os.stat(destination).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        raise UserError(f"{destination} is a directory: give the path of the file to write")
    if not stat.S_ISREG(mode):
        raise UserError(
            f"{destination} is not a regular file (a FIFO, a socket or a device): give the "
            "path of a file to write"
        )


def _refuse_run_files(destination: Path, places: set[Path], sources: Sequence[Path]) -> None:
    """Refuse a ``destination`` (reaching ``places``) that is a file a run keeps: by name
    in a run directory, or by inode, a hard link of one in a source's run directory."""
    for source in sources:
        for path in _run_files(resolved(source).parent):
            if _same_file(destination, path):
                raise UserError(
                    f"{destination} is {path} (a link to it), a file hookbus keeps in a run "
                    f"directory: writing it would destroy the run's file; give another path"
                )
    for place in sorted(places):
        if is_run_file_name(place.name) and is_run_directory(place.parent):
            shown = "" if place == _place(destination) else f" (which leads to {place})"
            raise UserError(
                f"{destination}{shown} is a file hookbus keeps in the run directory "
                f"{place.parent}: writing it would destroy the run's file; give another path"
            )


def _place(path: Path) -> Path:
    """``path`` with its folder resolved (links, ``..``) and its own name kept."""
    return resolved(path.parent) / path.name


def resolved(path: Path) -> Path:
    """``path`` with every link and ``..`` resolved (what is missing kept as named); a
    symbolic link loop on the way is a :class:`UserError` naming it, not the
    ``RuntimeError`` of :meth:`pathlib.Path.resolve`."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        raise UserError(f"{path} is a symbolic link loop: it leads nowhere") from None


def _same_file(first: Path, second: Path) -> bool:
    """Whether both paths are one file (one device and inode: a hard link counts)."""
    try:
        a, b = os.stat(first), os.stat(second)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _run_files(folder: Path) -> list[Path]:
    """The files a run keeps in ``folder``, when it is a run directory."""
    if not is_run_directory(folder):
        return []
    return [folder / name for name in sorted(os.listdir(folder)) if is_run_file_name(name)]


def write_output(path: Path, data: bytes) -> None:
    """Write a command's output file ``path``, once :func:`check_destination` let it: all
    or nothing (:func:`hookbus.engine.checkpoint.checkpoint_io.write_output_file`)."""
    write_output_file(path, data)

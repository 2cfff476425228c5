"""Small file systems for write-failure tests: a tmpfs a few KiB large, or read-only.

Mounting needs root (or a user namespace); where it is not allowed the test is skipped
with a message saying so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(folder: Path, *, size_kib: int = 64, read_only: bool = False) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size_kib`` KiB (``read_only``: mounted ro), unmounted after."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not allowed'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def remount_read_only(folder: Path) -> None:
    """Make the tmpfs at ``folder`` (from :func:`small_tmpfs`) read-only, its files kept."""
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fill the small file system at ``folder`` with ``folder/filler`` to the last byte."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def bind_read_only(folder: Path) -> None:
    """Make ``folder`` read-only from now on: a read-only bind mount of it over itself.
    Files a process already holds open for writing stay writable (they are on the mount
    below), as on a file system remounted read-only under a running program whose open
    files the kernel lets it finish; every new write under ``folder`` is ``EROFS``.
    Undo with :func:`unbind`. Needs root: skips the test where mounting is not allowed."""
    for options in (["--bind"], ["-o", "remount,bind,ro"]):
        mounted = subprocess.run(
            ["mount", *options, str(folder), str(folder)], capture_output=True, text=True
        )
        if mounted.returncode != 0:
            if options != ["--bind"]:
                unbind(folder)
            pytest.skip(f"cannot bind-mount here ({mounted.stderr.strip() or 'not allowed'})")


def unbind(folder: Path) -> None:
    """Remove the bind mount :func:`bind_read_only` put over ``folder``."""
    subprocess.run(["umount", str(folder)], capture_output=True, check=False)

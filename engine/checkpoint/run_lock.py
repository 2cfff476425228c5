"""The run lock: one training process per run directory.

Two ``hookbus train`` on one directory would interleave their checkpoints and write each
phase twice into ``metrics.json``. The first takes an exclusive ``flock`` on
``RUN_DIR/.hookbus.lock`` and writes its pid, host and start time into the file; a
second is refused at once with a message naming the holder. The operating system drops
the lock when the holder's process ends however it ends (``kill -9`` included), so a
lock left by a dead process is taken over by the next run; the file itself is never
trusted, only the ``flock`` on it. ``flock`` works on local file systems; on a network
file system that does not support it the lock may not hold.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from hookbus.engine.checkpoint.run_files import check_entries, check_links
from hookbus.engine.errors import UserError, write_failure, writing

LOCK_NAME = ".hookbus.lock"
NOTHING_TRAINED = "nothing was trained"


class RunDirectoryBusy(UserError):
    """Another process is training in this run directory."""


class RunLock:
    """An exclusive lock on a run directory, held from :meth:`acquire` to :meth:`release`.

    Example::

        lock = RunLock.acquire(Path("runs/first"))
        try:
            ...  # train
        finally:
            lock.release()
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Lock ``run_dir`` (created if missing), or raise :class:`RunDirectoryBusy`.

        A lock that cannot be written (a full disk, a read-only folder) is a
        :class:`~hookbus.engine.errors.WriteFailure` naming it; nothing was trained."""
        path = run_dir / LOCK_NAME
        with writing(run_dir, NOTHING_TRAINED):
            run_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(f"{path} is a symbolic link; remove it to train here") from None
            raise write_failure(path, exc, NOTHING_TRAINED) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunDirectoryBusy(
                f"run directory {run_dir} is in use by another training process ({holder}); "
                "wait for it to finish or stop it, or choose another checkpoint.dir"
            ) from None
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with writing(path, NOTHING_TRAINED):
                os.ftruncate(fd, 0)
                os.write(
                    fd, f"pid {os.getpid()} on {socket.gethostname()}, since {started}\n".encode()
                )
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def release(self) -> None:
        """Unlock (the file stays, empty of meaning until the next run locks it)."""
        if self._fd is None:
            return
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None


def check_run_dir(run_dir: Path) -> None:
    """Raise a UserError unless ``run_dir`` is a writable directory or can be made one.

    ``hookbus validate`` and the trainer call it before anything is built, so a file, a
    device such as ``/dev/null``, a path under a file or a read-only place is named at
    once instead of failing at the first write; so is a symbolic link in it that leads
    outside it (:func:`hookbus.engine.checkpoint.run_files.check_links`), and a name hookbus writes
    held by the wrong kind of entry, such as a folder named ``metrics.json``
    (:func:`hookbus.engine.checkpoint.run_files.check_entries`).
    """
    where = f"checkpoint.dir {str(run_dir)[:200]!r}"
    if run_dir.exists() or run_dir.is_symlink():
        if not run_dir.is_dir():
            raise UserError(f"{where} exists and is not a directory")
        if not os.access(run_dir, os.W_OK | os.X_OK):
            raise UserError(f"{where} is not writable")
        check_links(run_dir)
        check_entries(run_dir)
        return
    parent = run_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{where} cannot be made: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{where} cannot be made: {parent} is not writable")


def _read_holder(fd: int) -> str:
    text = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
    return text or "holder unknown"

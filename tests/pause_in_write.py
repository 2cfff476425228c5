"""Run a ``hookbus`` command that stops in the middle of writing one of its files, for a
test to kill it there with a real signal::

    python -m tests.pause_in_write NAME ARGUMENTS...

runs ``hookbus ARGUMENTS...``; when the command syncs the temporary file of its atomic
write of a file named ``NAME`` (``.NAME.tmp-PID``: its bytes written, not yet renamed into
place), it prints ``paused writing PATH`` on stderr and sleeps, never returning. Nothing
of hookbus is changed but :func:`os.fsync`, which it calls.
"""

from __future__ import annotations

import os
import sys
import time

from hookbus.cli import main

PAUSED = "paused writing "
"""The start of the line printed when the write is paused."""


def pause_in_writes_of(name: str) -> None:
    """Make :func:`os.fsync` of a temporary file of ``name`` print :data:`PAUSED` and sleep."""
    sync = os.fsync
    prefix = f".{name}.tmp-"

    def paused(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.basename(path).startswith(prefix):
            print(f"{PAUSED}{path}", file=sys.stderr, flush=True)
            time.sleep(3600)
        sync(fd)

    os.fsync = paused  # type: ignore[assignment]


if __name__ == "__main__":
    pause_in_writes_of(sys.argv[1])
    sys.exit(main(sys.argv[2:]))

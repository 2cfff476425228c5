"""Local launch: ``distributed.nproc_per_node`` training processes on this machine.

``hookbus train CONFIG distributed.nproc_per_node=N`` starts N copies of itself with the
environment ``torchrun`` would give them (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``), so a recipe runs the same way under either. The
launcher forwards SIGTERM and SIGUSR1 to every rank (preemption), and when one rank
fails it stops the others instead of leaving them waiting in a collective: SIGTERM
first, SIGKILL after ``grace_seconds``. Its exit status is the first failing rank's,
or 0 (128 + the signal's number for a rank killed by a signal, as a shell reports it).

Each rank runs in a session of its own, as torchrun starts its workers. Where the kernel
groups processes by session to share the CPU (Linux's autogroup, on by default on
desktops and many servers), the ranks then each get the share of a session against the
other jobs on the machine, as torchrun's workers do, instead of splitting one session's
share (the launcher's, and whatever else the same shell started) between them: on busy
cores that left the ranks runnable but waiting, for up to twice torchrun's wall time
with the same CPU time. A rank in its own session hears neither the terminal's Ctrl-C
nor its hang-up, so the launcher forwards SIGINT and SIGHUP too.

Nothing waits on a timer at start-up. The launcher opens the meeting port itself, a
listening socket on loopback, before it starts any rank, and hands it to rank 0
(:data:`STORE_FD_VARIABLE`), whose store serves on it
(:func:`hookbus.engine.process.distributed.init_from_environment`). A rank that gets there
before rank 0 is queued by the kernel, and answered as soon as rank 0 serves; without
it, its connection would be refused, and torch retries a refused connection only after
a back-off that grows while it waits (as torchrun's agent avoids by serving the store
before it starts the workers). It also waits for the ranks' exits, not on a poll.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

logger = logging.getLogger("hookbus")

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP)
"""Sent on to every rank: preemption (SIGTERM, SIGUSR1), and the terminal's Ctrl-C and
hang-up, which a rank in its own session does not receive itself."""
STORE_FD_VARIABLE = "HOOKBUS_STORE_FD"
"""The variable naming, to every rank, the file descriptor of the launcher's listening
socket, open in rank 0 alone: rank 0 serves the ranks' store on it."""


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def threads_per_rank(nproc: int) -> int:
    """Each rank's share of the cores this process may run on (at least one).

    ``nproc`` processes that each start torch's default pool (one thread per core) put
    ``nproc`` times as many busy threads as cores on the machine, and they slow each
    other down; torchrun avoids it the same way (one thread each unless
    ``OMP_NUM_THREADS`` says otherwise).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // nproc)


def launch_local(cli_args: Sequence[str], nproc: int, *, grace_seconds: float = 10.0) -> int:
    """Run ``hookbus <cli_args>`` as ``nproc`` ranks on loopback; returns the exit status.

    Each rank gets :func:`threads_per_rank` torch threads through ``OMP_NUM_THREADS``,
    unless the environment sets it already (``machine.num_threads`` in the config still
    wins inside each rank).
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(max(128, 4 * nproc))
    port = listener.getsockname()[1]
    threads = os.environ.get("OMP_NUM_THREADS") or str(threads_per_rank(nproc))
    ranks = []
    with listener:
        for rank in range(nproc):
            env = {
                **os.environ,
                "OMP_NUM_THREADS": threads,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(nproc),
                "LOCAL_WORLD_SIZE": str(nproc),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                STORE_FD_VARIABLE: str(listener.fileno()),
            }
            command = [sys.executable, "-m", "hookbus", *cli_args]
            kept = (listener.fileno(),) if rank == 0 else ()
            ranks.append(subprocess.Popen(command, env=env, pass_fds=kept, start_new_session=True))
    logger.info("started %d ranks on 127.0.0.1:%d, %s torch threads each", nproc, port, threads)

    def forward(signum: int, frame: FrameType | None) -> None:
        for process in ranks:
            if process.poll() is None:
                process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        return _supervise(ranks, grace_seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if any(process.poll() is None for process in ranks):  # the launcher itself failed
            _stop(ranks, grace_seconds)


def _supervise(
    ranks: list[subprocess.Popen], grace_seconds: float, wait: Callable[[], None] | None = None
) -> int:
    """Wait for the ranks; returns the run's exit status. ``wait`` blocks until a rank
    may have exited (default: until a child process exits, without reaping it)."""
    wait = wait or _wait_for_a_child
    while True:
        codes = [process.poll() for process in ranks]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank, code = failed[0]
            if any(code is None for code in codes):
                logger.error("rank %d exited with status %d: stopping the other ranks", rank, code)
                _stop(ranks, grace_seconds)
            return code if code > 0 else 128 - code  # killed by a signal: 128 + its number
        if all(code == 0 for code in codes):
            return 0
        wait()


def _wait_for_a_child() -> None:
    """Block until a child process has exited, leaving it for ``Popen.poll`` to reap (a
    forwarded signal returns early, which costs one more look)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # every child reaped already
        return
    except InterruptedError:
        return


def _stop(ranks: list[subprocess.Popen], grace_seconds: float) -> None:
    for process in ranks:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + grace_seconds
    for process in ranks:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

"""Preemption: SIGTERM, SIGUSR1 or Ctrl-C asks for a checkpoint at the next step boundary.

Clusters announce preemption with a signal (SLURM sends SIGTERM, or SIGUSR1 with
``--signal``). The first signal sets ``state.stop_requested``; the checkpoint hook saves
at the end of the current step, and the trainer then raises :class:`PreemptedError`,
which the ``hookbus`` command turns into exit status 75
(:data:`hookbus.engine.errors.PREEMPTED_EXIT_STATUS`) for a job script to requeue on.
A second signal stops at once, from the last checkpoint. Ctrl-C (SIGINT) does the same
and ends in :class:`InterruptedRun` (exit status 130), whose line says how to resume.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from hookbus.engine.bus.state import RunState
from hookbus.engine.errors import InterruptedRun, PreemptedError
from hookbus.engine.process import distributed

logger = logging.getLogger("hookbus")

SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
"""The signals that ask for a checkpoint and a stop."""

CTRL_C = "Ctrl-C (SIGINT)"
"""``state.stop_requested`` after Ctrl-C."""


class PreemptionGuard:
    """Installs the preemption signal handlers for the duration of a ``with`` block.

    Only the main thread can receive signals; elsewhere the guard does nothing.
    """

    def __init__(self, state: RunState) -> None:
        self.state = state
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> PreemptionGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = CTRL_C if signum == signal.SIGINT else signal.Signals(signum).name
        if self.state.stop_requested:
            stop = InterruptedRun if signum == signal.SIGINT else PreemptedError
            raise stop(
                f"second {name}: stopped at once; run the same command again to resume from "
                "the last checkpoint"
            )
        self.state.stop_requested = name
        logger.warning(
            "%s received: checkpointing at the end of this step, then stopping (%s again "
            "stops at once)",
            name,
            "Ctrl-C" if signum == signal.SIGINT else name,
        )


class Stops(NamedTuple):
    """The stops asked for at a boundary, agreed by every rank."""

    preempt: bool
    """A preemption signal: checkpoint, then raise :class:`PreemptedError`."""
    terminate: bool
    """``engine.terminate()``: end the run cleanly."""
    terminate_epoch: bool
    """``engine.terminate_epoch()``: end the current phase."""


def agreed_stops(engine: Any) -> Stops:
    """The stops any rank asked for; every rank gets the same answer.

    In one process this reads the flags: ``state.stop_requested`` (a preemption signal)
    and ignite's ``engine.should_terminate`` and ``engine.should_terminate_single_epoch``.
    With several, they are all-reduced (three bytes, on the host, over
    :func:`hookbus.engine.process.distributed.control_group`, so it never waits for a GPU), so
    that all ranks stop after the same step; a rank that learns of a stop from another
    gets the same flags set.
    """
    state = engine.state
    local = [
        bool(state.stop_requested),
        bool(engine.should_terminate),
        bool(engine.should_terminate_single_epoch),
    ]
    if not distributed.is_distributed():
        return Stops(*local)
    flags = torch.tensor(local, dtype=torch.uint8)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=distributed.control_group())
    preempt, terminate, terminate_epoch = (bool(flag) for flag in flags.tolist())
    if preempt and not state.stop_requested:
        state.stop_requested = "another rank"
    if terminate and not engine.should_terminate:
        engine.should_terminate = True
        state.stopped_by = "terminate() on another rank"
    if terminate_epoch and not engine.should_terminate_single_epoch:
        engine.should_terminate_single_epoch = True
    return Stops(preempt, terminate, terminate_epoch)

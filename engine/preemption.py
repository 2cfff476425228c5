"""Preemption: SIGTERM or SIGUSR1 asks for a checkpoint at the next step boundary.

Clusters announce preemption with a signal (SLURM sends SIGTERM, or SIGUSR1 with
``--signal``). The first signal sets ``state.stop_requested``; the checkpoint hook saves
at the end of the current step, and the trainer then raises :class:`PreemptedError`,
which the ``hookbus`` command turns into exit status :data:`PREEMPTED_EXIT_STATUS` for
a job script to requeue on. A second signal stops at once, from the last checkpoint.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

import torch
import torch.distributed as dist

from hookbus.engine import distributed

logger = logging.getLogger("hookbus")

PREEMPTED_EXIT_STATUS = 75
"""Exit status of a preempted run (EX_TEMPFAIL): requeue it to continue."""

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class PreemptedError(Exception):
    """The run stopped on a preemption signal; resubmitting it resumes."""


class PreemptionGuard:
    """Installs the preemption signal handlers for the duration of a ``with`` block.

    Only the main thread can receive signals; elsewhere the guard does nothing.
    """

    def __init__(self, state: Any) -> None:
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
        name = signal.Signals(signum).name
        if self.state.stop_requested:
            raise PreemptedError(f"second {name}: stopped at once; resume from the last checkpoint")
        self.state.stop_requested = name
        logger.warning("%s received: checkpointing at the end of this step, then stopping", name)


def stop_agreed(state: Any) -> bool:
    """Whether any rank was asked to stop; every rank gets the same answer.

    In one process this reads a flag. With several, the flags are all-reduced every
    step (one byte, on the host, over :func:`hookbus.engine.distributed.control_group`, so it
    never waits for a GPU), so that all ranks stop after the same step.
    """
    if not distributed.is_distributed():
        return bool(state.stop_requested)
    flag = torch.tensor([1 if state.stop_requested else 0], dtype=torch.uint8)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=distributed.control_group())
    agreed = bool(flag.item())
    if agreed and not state.stop_requested:
        state.stop_requested = "another rank"
    return agreed

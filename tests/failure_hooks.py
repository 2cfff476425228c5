"""Registered hooks that break a run on purpose, for the failure-path tests.

Recipes reach them with ``trainer.imports: [tests.failure_hooks]`` and, for instance,
``hooks.extra: [{name: poison_output, params: {at_iteration: N}}]`` (a NaN loss) or
``[{name: hang, params: {rank: 1, at_iteration: N}}]`` (a hung rank) or
``[{name: request_stop, params: {rank: 1, at_iteration: N}}]`` (a preemption signal
that reaches one rank only) or ``[{name: terminate_at, params: {at_iteration: N}}]``
(``engine.terminate()`` from a hook) or ``[{name: poison_optimizer_state, params:
{at_iteration: N}}]`` (an optimizer's momentum overflowing to inf) or ``[{name:
slow_end, params: {seconds: S}}]`` (end-of-run work that takes S seconds, before the
report's).
"""

from __future__ import annotations

import time

import torch
from ignite.engine import Engine

from hookbus import Hook, register_hook


@register_hook("poison_output")
class PoisonOutput(Hook):
    """Makes the model's embeddings NaN at one train iteration (counted from 1).

    Fires on ``on_forward``; reads ``train`` and ``iteration``, writes
    ``last_output["embeddings"]``.
    """

    def __init__(self, at_iteration: int) -> None:
        super().__init__()
        self.at_iteration = at_iteration

    def on_forward(self, engine: Engine) -> None:
        state = engine.state
        if state.train and state.iteration == self.at_iteration:
            output = state.last_output
            output["embeddings"] = [e * float("nan") for e in output["embeddings"]]


@register_hook("poison_optimizer_state")
class PoisonOptimizerState(Hook):
    """Writes inf into the optimizer's state after the update of one train iteration
    (counted from 1), as a momentum or second moment that overflowed would hold.

    Fires on ``on_update``; reads ``iteration`` and ``optimizer``, writes one element of
    the first floating-point tensor in the optimizer's state other than a step count.
    """

    def __init__(self, at_iteration: int) -> None:
        super().__init__()
        self.at_iteration = at_iteration

    def on_update(self, engine: Engine) -> None:
        state = engine.state
        if state.iteration != self.at_iteration:
            return
        for param_state in state.optimizer.state.values():
            for key, value in param_state.items():
                if key != "step" and torch.is_tensor(value) and value.is_floating_point():
                    value.view(-1)[0] = float("inf")
                    return
        raise AssertionError("the optimizer has no floating-point state to poison")


@register_hook("hang")
class Hang(Hook):
    """Stops one rank dead (a long sleep) after one train iteration, as a hung GPU or a
    stuck file system would, while the other ranks go on to the next collective.

    Fires on ``on_step``; reads ``rank`` and ``iteration``; writes nothing.
    """

    def __init__(self, rank: int, at_iteration: int, seconds: float = 3600.0) -> None:
        super().__init__()
        self.rank, self.at_iteration, self.seconds = rank, at_iteration, seconds

    def on_step(self, engine: Engine) -> None:
        state = engine.state
        if state.rank == self.rank and state.iteration == self.at_iteration:
            time.sleep(self.seconds)


@register_hook("request_stop")
class RequestStop(Hook):
    """Asks one rank to stop during one train iteration (counted from 1), as a
    preemption signal that reaches only that rank's process would.

    Fires on ``on_forward``; reads ``rank``, ``train`` and ``iteration``, writes
    ``stop_requested``.
    """

    def __init__(self, rank: int, at_iteration: int) -> None:
        super().__init__()
        self.rank, self.at_iteration = rank, at_iteration

    def on_forward(self, engine: Engine) -> None:
        state = engine.state
        if state.rank == self.rank and state.train and state.iteration == self.at_iteration:
            state.stop_requested = "SIGTERM"


@register_hook("terminate_at")
class TerminateAt(Hook):
    """Calls ``engine.terminate()`` at one train iteration (counted from 1), from
    ``on_step``, on every rank or on ``rank`` alone; reads ``rank``, ``train`` and
    ``iteration``."""

    def __init__(self, at_iteration: int, rank: int | None = None) -> None:
        super().__init__()
        self.at_iteration, self.rank = at_iteration, rank

    def on_step(self, engine: Engine) -> None:
        state = engine.state
        if self.rank not in (None, state.rank):
            return
        if state.train and state.iteration == self.at_iteration:
            engine.terminate()


@register_hook("slow_end")
class SlowEnd(Hook):
    """End-of-run work that takes ``seconds``: ``on_end`` sleeps, before the report hooks
    (``Priority.NORMAL``), so that a test can stop the run inside its end-of-run work."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def on_end(self, engine: Engine) -> None:
        time.sleep(self.seconds)

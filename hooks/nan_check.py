"""The NaN-check hook: stops the run when the loss is NaN or infinite."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from ignite.engine import Engine

from hookbus.engine.config import Config
from hookbus.engine.hook import Hook
from hookbus.engine.priorities import Priority
from hookbus.hooks.registry import register_hook

if TYPE_CHECKING:
    from typing_extensions import Self


class NonFiniteLossError(FloatingPointError):
    """The loss of a step was NaN or infinite; the message names the step and the value."""


@dataclass(frozen=True)
class _Step:
    """Where a loss was computed, recorded on the host when the step runs."""

    loss: torch.Tensor
    phase_idx: int
    phase_name: str
    train: bool
    step: int
    phase_length: int
    iteration: int

    def describe(self) -> str:
        where = f"phase {self.phase_idx} ({self.phase_name}), step {self.step}/{self.phase_length}"
        if self.train:
            return f"train iteration {self.iteration}, {where}"
        return f"{where}, after train iteration {self.iteration}"


@register_hook("nan_check")
class NanCheckHook(Hook):
    """Raises :class:`NonFiniteLossError` when a step's loss is NaN or infinite.

    =======================  ===============================================  ===========
    event                    reads                                            writes
    =======================  ===============================================  ===========
    ``on_loss_and_meter``    ``loss``, ``train``, ``iteration``,              --
                             ``batches``, ``phase_idx``, ``phase_name``,
                             ``phase_length``
    ``on_step``              ``stop_requested`` (when set: checks the steps   --
                             not checked yet, before the preemption
                             checkpoint)
    ``on_phase_end``         -- (checks the steps not checked yet)            --
    =======================  ===============================================  ===========

    Reading a loss on the host is a device sync, so the losses are kept (detached
    scalars) and checked with one sync on the step that computes every
    ``check_frequency``-th train iteration (in test phases: every ``check_frequency``-th
    step of the phase), where the log hook reads the loss anyway and before a checkpoint
    at a multiple of it; a phase end, and a step after which a preemption checkpoint is
    due, check what is left, before the phase's results are reported or checkpointed.
    ``check_frequency=1`` checks every step as it happens. The error names the first
    bad step: its train iteration (1-based: the one being computed in a train phase, the
    last one done in a test phase), phase index and name, step within the phase, and its
    loss. Priority -50: first among an event's handlers.

    Example::

        NanCheckHook(check_frequency=10).attach(trainer.engine)
        # NonFiniteLossError: loss is nan at train iteration 13, phase 2 (train), step 3/50
    """

    priority = Priority.HIGH

    def __init__(self, check_frequency: int = 1) -> None:
        if check_frequency < 1:
            raise ValueError(f"check_frequency must be >= 1, got {check_frequency}")
        super().__init__()
        self.check_frequency = check_frequency
        self._pending: list[_Step] = []

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """A check every ``hooks.nan_check.check_frequency`` steps; when that is null, at
        the steps that read the loss anyway (every ``trainer.log_frequency``-th) and at
        every iteration checkpoint (the greatest common divisor of the two), so that no
        per-step host sync is added and no checkpoint holds weights after a bad loss."""
        frequency = cfg.hooks.nan_check.check_frequency
        if frequency is None:
            frequency = math.gcd(cfg.trainer.log_frequency, cfg.checkpoint.iter_frequency)
        return cls(check_frequency=frequency)

    def on_loss_and_meter(self, engine: Engine) -> None:
        state: Any = engine.state
        self._pending.append(
            _Step(
                loss=state.loss,
                phase_idx=state.phase_idx,
                phase_name=state.phase_name,
                train=state.train,
                step=state.batches + 1,
                phase_length=state.phase_length,
                iteration=state.iteration,
            )
        )
        step = self._pending[-1]
        if (step.iteration if step.train else step.step) % self.check_frequency == 0:
            self._check()

    def on_step(self, engine: Engine) -> None:
        if engine.state.stop_requested:
            self._check()

    def on_phase_end(self, engine: Engine) -> None:
        self._check()

    def _check(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        finite = torch.isfinite(torch.stack([step.loss for step in pending])).tolist()
        for step, ok in zip(pending, finite, strict=True):
            if not ok:
                raise NonFiniteLossError(f"loss is {float(step.loss)} at {step.describe()}")

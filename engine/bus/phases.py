"""The phase plan: which train and test phases a run goes through, in order."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hookbus.engine.config import Config


@dataclass(frozen=True)
class Phase:
    """One pass over a data loader: a train phase (an epoch) or a test phase."""

    kind: str
    train: bool
    length: int


class PhaseEnd(Enum):
    """How a phase of the trainer's loop ended, and with it what the loop does next."""

    COMPLETED = "completed"
    """Every step ran; the run goes on to the next phase."""
    ENDED_EARLY = "ended early"
    """``engine.terminate_epoch()``: the phase ended after the current step, and ends as
    a completed one does (``on_phase_end``, ignite's ``EPOCH_COMPLETED``)."""
    ENDED_EARLY_QUIETLY = "ended early, skipping EPOCH_COMPLETED"
    """``engine.terminate_epoch(skip_epoch_completed=True)``: as :attr:`ENDED_EARLY`,
    without ignite's ``EPOCH_COMPLETED``."""
    STOPPED = "stopped"
    """``engine.terminate()``: the run ends cleanly, without ``on_phase_end``."""
    PREEMPTED = "preempted"
    """A preemption signal: the step's checkpoint is written, then the run raises
    :class:`hookbus.engine.errors.PreemptedError`."""

    @property
    def goes_on(self) -> bool:
        """True when the phase ran to its end (``on_phase_end`` fires) and the run goes on."""
        return self not in (PhaseEnd.STOPPED, PhaseEnd.PREEMPTED)


def build_phase_plan(cfg: Config, *, train_length: int, test_length: int) -> list[Phase]:
    """The phases of a run, as VISSL orders them.

    ``optimizer.num_epochs`` train phases; when ``trainer.test_model`` is on, a test phase
    follows every ``trainer.test_every_num_epochs``-th train phase. ``trainer.test_only``
    makes the plan a single test phase. A plan for N epochs is a prefix of the plan for
    more epochs, so a finished run can be extended and resumed.
    """
    test = Phase("test", False, test_length)
    if cfg.trainer.test_only:
        return [test]
    plan: list[Phase] = []
    every = cfg.trainer.test_every_num_epochs
    for epoch in range(cfg.optimizer.num_epochs):
        plan.append(Phase("train", True, train_length))
        if cfg.trainer.test_model and (epoch + 1) % every == 0:
            plan.append(test)
    return plan


def phase_label(phase_idx: int, phase_count: int) -> str:
    """A phase as the log names it, counted from 1: ``phase_label(2, 44) == 'phase 3/44'``.

    Checkpoint file names keep the 0-based index (``phase00002_...`` is phase 3/44)."""
    return f"phase {phase_idx + 1}/{phase_count}"


def epoch_label(train_phase_idx: int, train_phase_count: int) -> str:
    """A train phase as the log and the progress bar name it, counted from 1:
    ``epoch_label(1, 40) == 'epoch 2/40'``."""
    return f"epoch {train_phase_idx + 1}/{train_phase_count}"

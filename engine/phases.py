"""The phase plan: which train and test phases a run goes through, in order."""

from __future__ import annotations

from dataclasses import dataclass

from hookbus.engine.config import Config


@dataclass(frozen=True)
class Phase:
    """One pass over a data loader: a train phase (an epoch) or a test phase."""

    kind: str
    train: bool
    length: int


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

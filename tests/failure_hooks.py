"""A registered hook that breaks a run on purpose, for the failure-path tests.

Recipes reach it with ``trainer.imports: [tests.failure_hooks]`` and
``hooks.extra: [{name: poison_output, params: {at_iteration: N}}]``.
"""

from __future__ import annotations

from ignite.engine import Engine

from engine.hook import Hook
from hooks import register_hook


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
        if state.train and state.iteration + 1 == self.at_iteration:
            output = state.last_output
            output["embeddings"] = [e * float("nan") for e in output["embeddings"]]

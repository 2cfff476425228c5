"""GradNormHook: the tutorial's hook, logging the gradient norm every N train iterations."""

from __future__ import annotations

import logging
from typing import Any

import torch

from hookbus import Hook, Priority, RunEngine, register_hook

logger = logging.getLogger("hookbus")


@register_hook("grad_norm")
class GradNormHook(Hook):
    """Logs the L2 norm of all gradients every ``every`` train iterations (rank 0).

    ===============  ================================  ===================================
    event            reads                             writes
    ===============  ================================  ===================================
    ``on_backward``  ``rank``, ``iteration``,          a log line; ``largest``, the
                     ``base_model``                    largest norm so far (checkpointed)
    ===============  ================================  ===================================

    ``on_backward`` fires inside the train step, which ``state.iteration`` already
    counts (from 1, as ignite does). Reading the norm as a float is a device sync, so it
    happens on logged iterations only.

    Example::

        GradNormHook(every=10).attach(trainer.engine)
    """

    priority = Priority.REPORT

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        super().__init__()
        self.every = every
        self.largest = 0.0

    def on_backward(self, engine: RunEngine) -> None:
        if not self.is_rank_zero(engine) or not self.every_n_train_iterations(engine, self.every):
            return
        state = engine.state
        iteration = state.iteration
        grads = [p.grad.flatten() for p in state.base_model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0
        self.largest = max(self.largest, norm)
        logger.info("iteration %d: gradient norm %.4f", iteration, norm)

    def state_dict(self) -> dict[str, Any]:
        return {"largest": self.largest}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.largest = state["largest"]

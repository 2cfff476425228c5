"""NnclrSupportHook: NNCLR's support set, where each embedding finds its nearest neighbour."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.process import distributed
from hookbus.parts.losses.ring_buffer import RingBuffer


@register_hook("nnclr_support")
class NnclrSupportHook(Hook):
    """A first-in first-out support set of the last ``size`` embeddings of the first view.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            moves a support set loaded from a checkpoint to
                            ``state.device``
    ``on_forward``          train and test phases: writes ``neighbours`` into
                            ``state.last_output``, per view ``[B, D]``: for each
                            L2-normalised ``embeddings`` row, the support row of highest
                            cosine similarity (no gradient)
    ``on_loss_and_meter``   train phases only: adds the step's L2-normalised, detached
                            ``embeddings`` of the first view (gathered from every rank
                            in rank order, so the support set equals one process's on
                            the global batch), the oldest dropping out
    ======================  ===========================================================

    The search runs over the rows added so far: before the set is full, only those;
    before the first step, none, and each embedding is its own neighbour (the loss is
    then InfoNCE between a view's embedding and the other view's prediction). Among
    equally near rows the lowest index wins. State: the rows, the write position and the
    fill count, in checkpoints under ``nnclr_support``.
    """

    priority = Priority.METHOD + 10

    def __init__(self, size: int) -> None:
        super().__init__()
        self.buffer = RingBuffer(size)
        self.size = size

    @property
    def support(self) -> torch.Tensor | None:
        """The support set's storage ``[size, D]`` (slot order); None before the first
        step. ``buffer.position`` is the next row written, ``buffer.filled`` the rows in use."""
        return self.buffer.rows

    def on_start(self, engine: RunEngine) -> None:
        self.buffer.to(engine.state.device)

    def on_forward(self, engine: RunEngine) -> None:
        output = engine.state.last_output
        if "embeddings" in output:
            output["neighbours"] = [self.nearest(view) for view in output["embeddings"]]

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        state = engine.state
        if state.train:
            first = state.last_output["embeddings"][0]
            self.enqueue(distributed.all_gather_cat(F.normalize(first.detach().float(), dim=1)))

    @torch.no_grad()
    def nearest(self, embeddings: torch.Tensor) -> torch.Tensor:
        """The nearest support row ``[B, D]`` (cosine similarity) of each row of
        ``embeddings``; each L2-normalised row itself while the support set is empty."""
        queries = F.normalize(embeddings.detach().float(), dim=1)
        support = self.buffer.in_use()
        if support is None:
            return queries
        return support[(queries @ support.T).argmax(dim=1)]

    def enqueue(self, embeddings: torch.Tensor) -> None:
        """Add ``embeddings`` ``[n, D]``; beyond ``size`` rows, the oldest are overwritten."""
        self.buffer.write(embeddings)

    def state_dict(self) -> dict[str, Any]:
        """``support`` (``[size, D]``; an empty tensor before the first step),
        ``position`` (the next row written) and ``filled`` (rows in use)."""
        return self.buffer.state("support")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.buffer.load(state, "support")

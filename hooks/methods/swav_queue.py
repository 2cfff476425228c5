"""SwavQueueHook: SwAV's queue of earlier embeddings, joining the Sinkhorn problem."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.process import distributed
from hookbus.parts.losses.ring_buffer import RingBuffer


@register_hook("swav_queue")
class SwavQueueHook(Hook):
    """One queue of the last ``size`` embeddings per assigned view, from ``start_epoch``.

    ======================  ===========================================================
    event                   what it does (train phases of epoch >= ``start_epoch``)
    ======================  ===========================================================
    ``on_start``            checks that the model has prototypes; moves a loaded queue
                            to ``state.device``
    ``on_forward``          once the queue is full: writes ``queue_scores`` (one
                            ``[size, K]`` per assigned view: the queued embeddings
                            scored by the current prototypes, no gradient) into
                            ``state.last_output``
    ``on_loss_and_meter``   queues the step's L2-normalised ``embeddings`` of the first
                            ``assign_views`` views (of every rank, gathered); the
                            oldest drop out
    ======================  ===========================================================

    Small batches give Sinkhorn-Knopp too few samples to spread over the prototypes;
    the queue adds earlier ones. State: the queue and its fill count, in checkpoints
    under ``swav_queue``.
    """

    priority = Priority.METHOD + 10

    def __init__(self, size: int, *, start_epoch: int = 0, assign_views: int = 2) -> None:
        super().__init__()
        if size < 1 or start_epoch < 0 or assign_views < 1:
            raise ValueError(
                "need size >= 1, start_epoch >= 0, assign_views >= 1; got "
                f"{size}, {start_epoch}, {assign_views}"
            )
        self.size = size
        self.start_epoch = start_epoch
        self.assign_views = assign_views
        # One buffer for every view: its rows along dim 1, [assign_views, size, D].
        self.buffer = RingBuffer(size, dim=1)

    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        if getattr(state.base_model, "prototypes", None) is None:
            raise ValueError("swav_queue needs a model with prototypes (model.prototypes.count)")
        self.buffer.to(state.device)

    @property
    def queue(self) -> torch.Tensor | None:
        """The queued embeddings ``[assign_views, size, D]``, the newest first (each
        step's in their batch order); None before the first step. ``buffer.filled``
        counts the rows queued so far."""
        return self.buffer.newest_first()

    def on_forward(self, engine: RunEngine) -> None:
        state = engine.state
        if not self._active(state) or self.buffer.filled < self.size:
            return
        with torch.no_grad():
            # The queue is full (filled == size), and the model has prototypes.
            queue = cast(torch.Tensor, self.queue)
            prototypes = cast(nn.Module, state.base_model.prototypes)
            state.last_output["queue_scores"] = [prototypes(queued) for queued in queue]

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        state = engine.state
        if not self._active(state):
            return
        embeddings = torch.stack(
            [
                distributed.all_gather_cat(F.normalize(view.detach().float(), dim=1))
                for view in state.last_output["embeddings"][: self.assign_views]
            ]
        )
        # Written last row first, so that newest_first gives each step's rows in order.
        self.buffer.write(embeddings.flip(1))

    def _active(self, state: RunState) -> bool:
        return state.train and state.train_phase_idx >= self.start_epoch

    def state_dict(self) -> dict[str, Any]:
        """``queue`` (``[assign_views, size, D]``; empty before the first step) and ``filled``."""
        queue = self.queue
        return {"queue": torch.empty(0) if queue is None else queue, "filled": self.buffer.filled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.buffer.load_newest_first(state["queue"], state["filled"])

"""KeyQueueHook: MoCo's queue of momentum-encoder keys, the negatives of the loss."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from ignite.engine import Engine

from hookbus.engine import distributed
from hookbus.engine.config import Config
from hookbus.engine.hook import Hook
from hookbus.engine.priorities import Priority
from hookbus.hooks.registry import register_hook


@register_hook("key_queue")
class KeyQueueHook(Hook):
    """A first-in first-out queue of the last ``size`` keys of the momentum encoder.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            moves a queue loaded from a checkpoint to ``state.device``
    ``on_forward``          writes ``queue`` (``[n, D]``, the ``n <= size`` keys queued
                            so far, L2-normalised) into ``state.last_output``; nothing
                            before the first keys
    ``on_loss_and_meter``   train phases only: queues the step's keys, the
                            L2-normalised ``teacher_embeddings`` of every view (each
                            view gathered from every rank in rank order, so the queue
                            equals one process's on the global batch), the oldest
                            keys dropping out
    ======================  ===========================================================

    A new queue tensor is made at each step, so the loss's view of the old one stays
    valid for the backward pass. State: the keys, the write position and the fill
    count, in checkpoints under ``key_queue``.
    """

    priority = Priority.METHOD + 10

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.keys: torch.Tensor | None = None
        self.position = 0
        self.filled = 0

    @classmethod
    def from_config(cls, cfg: Config) -> KeyQueueHook:
        """A queue of ``loss.moco.queue_size`` keys."""
        return cls(cfg.loss.moco.queue_size)

    def on_start(self, engine: Engine) -> None:
        if self.keys is not None:
            self.keys = self.keys.to(engine.state.device)

    def on_forward(self, engine: Engine) -> None:
        if self.keys is not None:
            engine.state.last_output["queue"] = self.keys[: self.filled]

    def on_loss_and_meter(self, engine: Engine) -> None:
        state = engine.state
        if not state.train:
            return
        if "teacher_embeddings" not in state.last_output:
            raise KeyError("key_queue needs output['teacher_embeddings'] (momentum_teacher hook)")
        keys = torch.cat(
            [
                distributed.all_gather_cat(F.normalize(key.detach().float(), dim=1))
                for key in state.last_output["teacher_embeddings"]
            ]
        )
        self.enqueue(keys)

    def enqueue(self, keys: torch.Tensor) -> None:
        """Add ``keys`` ``[n, D]``; beyond ``size`` keys, the oldest are overwritten."""
        keys = keys[-self.size :]
        if self.keys is None:
            self.keys = keys.new_zeros(self.size, keys.shape[1])
        slots = (self.position + torch.arange(len(keys), device=keys.device)) % self.size
        self.keys = self.keys.index_copy(0, slots, keys.to(self.keys.dtype))
        self.position = (self.position + len(keys)) % self.size
        self.filled = min(self.size, self.filled + len(keys))

    def state_dict(self) -> dict[str, Any]:
        """The queue: ``keys`` (an empty tensor before the first keys), ``position``, ``filled``."""
        keys = torch.empty(0) if self.keys is None else self.keys
        return {"keys": keys, "position": self.position, "filled": self.filled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.keys = state["keys"] if state["filled"] else None
        self.position = state["position"]
        self.filled = state["filled"]

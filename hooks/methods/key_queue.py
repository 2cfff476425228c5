"""KeyQueueHook: MoCo's queue of momentum-encoder keys, the negatives of the loss."""

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
        self.buffer = RingBuffer(size)
        self.size = size

    @property
    def keys(self) -> torch.Tensor | None:
        """The queue's storage ``[size, D]`` (slot order); None before the first keys.
        ``buffer.position`` is the next slot written, ``buffer.filled`` the keys held."""
        return self.buffer.rows

    def on_start(self, engine: RunEngine) -> None:
        self.buffer.to(engine.state.device)

    def on_forward(self, engine: RunEngine) -> None:
        queue = self.buffer.in_use()
        if queue is not None:
            engine.state.last_output["queue"] = queue

    def on_loss_and_meter(self, engine: RunEngine) -> None:
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
        self.buffer.write(keys)

    def state_dict(self) -> dict[str, Any]:
        """The queue: ``keys`` (an empty tensor before the first keys), ``position``, ``filled``."""
        return self.buffer.state("keys")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.buffer.load(state, "keys")

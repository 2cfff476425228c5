"""The MoCo v2 loss: InfoNCE of queries against momentum keys and a queue of negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class MocoLoss(nn.Module):
    """Symmetric InfoNCE on ``output["embeddings"]`` (queries, per view ``[B, D]``),
    ``output["teacher_embeddings"]`` (keys from the momentum encoder, per view) and
    ``output["queue"]`` (``[Q, D]`` L2-normalised keys of earlier batches; absent or
    empty before the first batch is queued).

    For every ordered pair of different views ``(a, b)`` each query of view ``a`` is
    classified (cross-entropy, logits divided by ``temperature``) toward the key of the
    same image in view ``b`` among the queue's keys; queries and keys are
    L2-normalised. The loss is the mean over the pairs. No gradient reaches the keys.
    It runs in float32 with autocast off.
    """

    def __init__(self, temperature: float) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        if "teacher_embeddings" not in output:
            raise KeyError(
                "MocoLoss needs output['teacher_embeddings']: the momentum_teacher hook "
                "writes them (loss.name moco adds it to the default hooks)"
            )
        views = output["embeddings"]
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            queries = [F.normalize(at_least_float32(view), dim=1) for view in views]
            keys = [
                F.normalize(at_least_float32(key.detach()), dim=1)
                for key in output["teacher_embeddings"]
            ]
            queue = output.get("queue")
            losses = [
                self._pair_loss(query, key, queue)
                for a, query in enumerate(queries)
                for b, key in enumerate(keys)
                if a != b
            ]
        if not losses:
            raise ValueError("MoCo needs at least 2 views with keys")
        return torch.stack(losses).mean()

    def _pair_loss(self, queries: Tensor, keys: Tensor, queue: Tensor | None) -> Tensor:
        positive = (queries * keys).sum(dim=1, keepdim=True)
        logits = positive
        if queue is not None and len(queue):
            negatives = queries @ queue.to(queries.dtype).T
            logits = torch.cat([positive, negatives], dim=1)
        targets = torch.zeros(len(queries), dtype=torch.long, device=queries.device)
        return F.cross_entropy(logits / self.temperature, targets)

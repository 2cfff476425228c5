"""The SwAV loss: each view predicts the Sinkhorn codes of the other views."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32
from hookbus.parts.losses.sinkhorn import sinkhorn


class SwavLoss(nn.Module):
    """Swapped prediction on ``output["scores"]`` (per view ``[B, K]``: cosines of the
    embeddings with the prototypes; views of any size, multi-crop included).

    For each of the first ``assign_views`` views ``i``, codes ``q_i`` come from
    :func:`sinkhorn` on that view's scores (no gradient); with
    ``output["queue_scores"]`` (the scores of queued embeddings, one ``[L, K]`` per
    assigned view) those rows join the Sinkhorn problem and only the batch's rows are
    kept. Every other view ``v`` predicts them: ``-sum_k q_ik log softmax(s_v / T)_k``,
    averaged over the batch and over the ``V - 1`` other views; the loss is the mean
    over the assigned views. It runs in float32 with autocast off.
    """

    def __init__(
        self, temperature: float, epsilon: float, sinkhorn_iterations: int, assign_views: int
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature
        self.epsilon = epsilon
        self.sinkhorn_iterations = sinkhorn_iterations
        self.assign_views = assign_views

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = output["scores"]
        if len(views) < 2 or len(views) < self.assign_views:
            raise ValueError(
                f"SwAV needs at least 2 views and assign_views={self.assign_views}, "
                f"got {len(views)}"
            )
        queue_scores = output.get("queue_scores")
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            scores = [at_least_float32(view) for view in views]
            log_probs = [F.log_softmax(view / self.temperature, dim=1) for view in scores]
            losses = []
            for i in range(self.assign_views):
                codes = self.codes(scores[i], None if queue_scores is None else queue_scores[i])
                predictions = [
                    -(codes * log_prob).sum(dim=1).mean()
                    for v, log_prob in enumerate(log_probs)
                    if v != i
                ]
                losses.append(torch.stack(predictions).mean())
        return torch.stack(losses).mean()

    def codes(self, scores: Tensor, queued: Tensor | None) -> Tensor:
        """Sinkhorn codes ``[B, K]`` of ``scores``, solved together with ``queued`` rows."""
        scores = scores.detach()
        if queued is not None:
            joint = torch.cat([queued.to(scores.dtype), scores])
            return sinkhorn(joint, self.epsilon, self.sinkhorn_iterations)[-len(scores) :]
        return sinkhorn(scores, self.epsilon, self.sinkhorn_iterations)

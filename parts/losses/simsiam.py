"""The SimSiam loss: predictions regressed onto the other view's stop-gradient embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.parts.losses.precision import at_least_float32


class SimsiamLoss(nn.Module):
    """Symmetric negative cosine similarity between ``output["predictions"]`` (the
    predictor, per view ``[B, D]``) and ``output["embeddings"]`` (the projector) of the
    other view, with a stop-gradient on the embeddings.

    For every ordered pair of different views ``(a, b)``: the mean over the batch of
    ``-cos(prediction_a, stopgrad(embedding_b))``; the loss is the mean over the pairs,
    which for two views is the paper's ``D(p1, z2) / 2 + D(p2, z1) / 2``. It lies in
    ``[-1, 1]``, -1 when every prediction points along its target. The embeddings get
    gradient only through the predictor's input, never as targets. No momentum encoder:
    the same network gives predictions and targets. It runs in float32 with autocast off.
    """

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        if "predictions" not in output:
            raise KeyError("SimsiamLoss needs output['predictions']: set model.predictor.dims")
        predictions, embeddings = output["predictions"], output["embeddings"]
        with torch.autocast(device_type=predictions[0].device.type, enabled=False):
            online = [F.normalize(at_least_float32(p), dim=1) for p in predictions]
            targets = [F.normalize(at_least_float32(z.detach()), dim=1) for z in embeddings]
            losses = [
                -(p * z).sum(dim=1).mean()
                for a, p in enumerate(online)
                for b, z in enumerate(targets)
                if a != b
            ]
        if not losses:
            raise ValueError("SimSiam needs at least 2 views")
        return torch.stack(losses).mean()

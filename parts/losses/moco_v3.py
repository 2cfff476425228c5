"""The MoCo v3 loss: InfoNCE of online predictions against the momentum encoder's keys of
the whole global batch, symmetrised over the views."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.global_batch import contrast_with_gathered
from hookbus.parts.losses.precision import at_least_float32


class MocoV3Loss(nn.Module):
    """Symmetric InfoNCE on ``output["predictions"]`` (queries: the online predictor's
    outputs, per view ``[B, D]``) and ``output["teacher_embeddings"]`` (keys: the momentum
    encoder's projections, per view ``[B, D]``), as in "An Empirical Study of Training
    Self-Supervised Vision Transformers" (Chen, Xie and He, 2021).

    For a query view ``a`` and a key view ``b``,
    ``ctr(q_a, k_b) = 2 * temperature * CE(q_a @ K_b.T / temperature, positives)``: the
    queries and keys are L2-normalised, ``K_b`` is the keys of view ``b`` gathered from
    every rank in rank order (the global batch, no queue; every rank must have the same
    batch size), and the positive of query row ``i`` on rank ``r`` is the key at global
    index ``r * B + i``, the same image's. The cross-entropy is the mean over the rank's
    own queries (DDP's mean of the ranks' gradients then gives the gradient of the global
    batch's mean). For two views the loss is the paper's ``ctr(q_1, k_2) + ctr(q_2, k_1)``;
    for more, twice the mean of ``ctr`` over the ordered pairs of different views, which
    keeps that scale. No gradient reaches the keys. It runs in float32 with autocast off.
    """

    def __init__(self, temperature: float = 0.2) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        if "teacher_embeddings" not in output:
            raise KeyError(
                "MocoV3Loss needs output['teacher_embeddings']: the momentum_teacher hook "
                "writes them (loss.name moco_v3 adds it to the default hooks)"
            )
        if "predictions" not in output:
            raise KeyError(
                "MocoV3Loss needs output['predictions']: set model.predictor.dims "
                "(the queries are the predictor's outputs)"
            )
        predictions = output["predictions"]
        with torch.autocast(device_type=predictions[0].device.type, enabled=False):
            queries = [F.normalize(at_least_float32(p), dim=1) for p in predictions]
            keys = [
                distributed.all_gather_cat(F.normalize(at_least_float32(k.detach()), dim=1))
                for k in output["teacher_embeddings"]
            ]
            losses = [
                self._contrast(query, key)
                for a, query in enumerate(queries)
                for b, key in enumerate(keys)
                if a != b
            ]
        if not losses:
            raise ValueError("MoCo v3 needs at least 2 views with keys")
        return 2 * torch.stack(losses).mean()

    def _contrast(self, queries: Tensor, keys: Tensor) -> Tensor:
        """``ctr(q, k)``: queries ``[B, D]`` of this rank against the global keys ``[N, D]``."""
        return contrast_with_gathered(queries, keys, self.temperature) * 2 * self.temperature

"""Sinkhorn-Knopp: soft assignments of samples to prototypes with equal prototype shares."""

from __future__ import annotations

import torch
from torch import Tensor

from hookbus.engine.process import distributed


@torch.no_grad()
def sinkhorn(
    scores: Tensor, epsilon: float, iterations: int, *, global_rows: int | Tensor | None = None
) -> Tensor:
    """Codes ``Q`` ``[B, K]`` of the prototype ``scores`` ``[B, K]`` (SwAV).

    ``Q`` starts as ``exp(scores / epsilon)`` and is rescaled ``iterations`` times, each
    time so that every prototype (column) holds a ``1/K`` share of the total mass, then
    every sample (row) a ``1/B`` share; the result is multiplied by ``B``. Each row of
    ``Q`` then sums to 1 exactly and each column to about ``B / K`` (exactly in the
    limit of many iterations). Computed in float32 (float64 stays float64) with
    autocast off; when distributed, the sums run over the global batch (every rank
    passes its own rows and gets its own rows back); ``global_rows`` is the number of
    rows of all ranks together when they differ between ranks (iBOT's masked patches;
    a rank may have none), ``len(scores)`` times the world size when None.
    """
    if epsilon <= 0 or iterations < 1:
        raise ValueError(f"need epsilon > 0 and iterations >= 1, got {epsilon}, {iterations}")
    with torch.autocast(device_type=scores.device.type, enabled=False):
        scaled = scores.to(torch.promote_types(scores.dtype, torch.float32)) / epsilon
        # Subtracting the global maximum changes nothing after normalisation; it keeps
        # exp() finite.
        largest = scaled.max() if scaled.numel() else scaled.new_tensor(-torch.inf)
        codes = torch.exp(scaled - distributed.all_reduce_max(largest))
        batch = len(codes) * distributed.world_size() if global_rows is None else global_rows
        count = codes.shape[1]
        codes /= distributed.all_reduce_sum(codes.sum())
        for _ in range(iterations):
            codes /= distributed.all_reduce_sum(codes.sum(dim=0, keepdim=True))
            codes /= count
            codes /= codes.sum(dim=1, keepdim=True)
            codes /= batch
        return codes * batch

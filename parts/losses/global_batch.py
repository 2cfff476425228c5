"""Contrast against a batch gathered from every rank: where this rank's rows stand in it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.engine.process import distributed


def own_rows(count: int, device: torch.device | str) -> Tensor:
    """The indices ``[count]`` of this rank's ``count`` rows in a batch gathered from every
    rank in rank order (``distributed.all_gather_cat``): ``rank * count + i``. Every rank
    must have the same batch size; one process gets ``0 .. count - 1``."""
    return torch.arange(count, device=device) + distributed.rank() * count


def contrast_with_gathered(queries: Tensor, keys: Tensor, temperature: float) -> Tensor:
    """InfoNCE of this rank's ``queries`` ``[B, D]`` against the gathered ``keys``
    ``[W * B, D]``: the mean cross-entropy of ``queries @ keys.T / temperature`` toward
    each query's own image, the key at :func:`own_rows`. The inputs are used as given
    (normalise them first for cosine similarities)."""
    logits = queries @ keys.T / temperature
    return F.cross_entropy(logits, own_rows(len(queries), queries.device))

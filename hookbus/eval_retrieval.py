"""Retrieval scores of cached features: each test image queries the train images by cosine
similarity; the train images of its class are the relevant ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

RANKED_AT_ONCE = 1 << 24
"""Entries of the query x database rankings held at once (a chunk of queries at a time):
about 0.5 GiB of working memory whatever the database's size."""


@dataclass(frozen=True)
class RetrievalResult:
    """Mean average precision and recall@k over the queries."""

    mean_average_precision: float
    recall_at: dict[int, float]

    def to_json(self) -> dict:
        """The result as JSON-ready values."""
        return {
            "map": self.mean_average_precision,
            "recall_at": {str(k): value for k, value in self.recall_at.items()},
        }


def retrieval(
    database: tuple[Tensor, Tensor], queries: tuple[Tensor, Tensor], ks: Sequence[int]
) -> RetrievalResult:
    """mAP and recall@k of ``queries`` (features ``[Q, D]``, labels ``[Q]``) against
    ``database`` (``[M, D]``, ``[M]``), ranked by cosine similarity, highest first.

    A query's average precision is the mean, over the database images of its class, of
    the precision of the ranking cut at each of them; a query whose class has no
    database image is left out of the mean. Recall@k is the fraction of queries with at
    least one image of their class among the first ``k`` (the metric-learning
    convention: Song et al., 2016), counted over every query.
    """
    memory_x, memory_y = database
    query_x, query_y = queries
    memory = F.normalize(memory_x.float(), dim=1)
    memory_y = memory_y.to(memory.device)
    largest = min(max(ks), len(memory))
    precisions: list[Tensor] = []
    hits = {k: 0 for k in ks}
    step = max(1, RANKED_AT_ONCE // max(1, len(memory)))
    for start in range(0, len(query_x), step):
        chunk = F.normalize(query_x[start : start + step].float(), dim=1).to(memory.device)
        labels = query_y[start : start + step].to(memory.device)
        order = (chunk @ memory.T).argsort(dim=1, descending=True, stable=True)
        relevant = memory_y[order] == labels.unsqueeze(1)
        found = relevant.cumsum(dim=1).double()
        ranks = torch.arange(1, len(memory) + 1, device=memory.device, dtype=torch.float64)
        totals = relevant.sum(dim=1)
        average = (found / ranks * relevant).sum(dim=1) / totals.clamp(min=1)
        precisions.append(average[totals > 0])
        first = relevant[:, :largest]
        for k in ks:
            hits[k] += int(first[:, :k].any(dim=1).sum())
    per_query = torch.cat(precisions)
    mean_ap = float(per_query.mean()) if len(per_query) else float("nan")
    return RetrievalResult(mean_ap, {k: hits[k] / len(query_x) for k in ks})

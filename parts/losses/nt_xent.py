"""The NT-Xent (normalised temperature-scaled cross-entropy) loss of SimCLR."""

from __future__ import annotations

from itertools import combinations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus.engine.process import distributed
from hookbus.parts.losses.global_batch import own_rows
from hookbus.parts.losses.precision import at_least_float32


class NTXentLoss(nn.Module):
    """NT-Xent on ``output["embeddings"]``, a list of per-view embeddings ``[B, D]``.

    For two views ``z1, z2`` the ``2B`` embeddings are L2-normalised, their cosine
    similarities divided by ``temperature``, self-similarities masked out, and each
    sample is classified (cross-entropy) toward the other view of its image among the
    ``2B - 1`` others; the loss is the mean over the ``2B`` samples. With more views
    it is the mean of that loss over all pairs of views.

    When torch.distributed is initialised with more than one process, the embeddings
    of all ranks are gathered (``hookbus.engine.process.distributed.all_gather_cat_with_gradient``,
    through which gradients flow) and serve as negatives: each rank's ``2B`` samples are
    classified among the ``2BW - 1`` others, the positive found at this rank's offset,
    and the loss is the mean over this rank's samples. Averaging the ranks' losses
    (and DDP's averaging of gradients) gives the loss over the global batch. Every
    rank must then have the same batch size.

    The loss is computed in float32 (float64 for float64 embeddings) with autocast
    disabled.
    """

    def __init__(self, temperature: float) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = output["embeddings"]
        if len(views) < 2:
            raise ValueError(f"NT-Xent needs at least 2 views, got {len(views)}")
        with torch.autocast(device_type=views[0].device.type, enabled=False):
            local = [F.normalize(at_least_float32(view), dim=1) for view in views]
            gathered = [distributed.all_gather_cat_with_gradient(view) for view in local]
            losses = [
                self._pair_loss(local[a], gathered[a], local[b], gathered[b])
                for a, b in combinations(range(len(views)), 2)
            ]
        return torch.stack(losses).mean()

    def _pair_loss(
        self, first: Tensor, all_first: Tensor, second: Tensor, all_second: Tensor
    ) -> Tensor:
        """NT-Xent of two views: local ``[B, D]`` queries against global ``[G, D]`` keys.

        ``first[i]`` is row ``own_rows(B)[i]`` of ``all_first``, likewise for the second view.
        """
        global_size = len(all_first)
        queries = torch.cat([first, second])
        keys = torch.cat([all_first, all_second])
        logits = queries @ keys.T / self.temperature
        own = own_rows(len(first), queries.device)
        self_columns = torch.cat([own, own + global_size])
        positive_columns = torch.cat([own + global_size, own])
        is_self = F.one_hot(self_columns, 2 * global_size).bool()
        logits = logits.masked_fill(is_self, float("-inf"))
        return F.cross_entropy(logits, positive_columns)

"""The alignment-and-uniformity method: the tutorial's SSL method, added as a registered loss.

Wang and Isola (ICML 2020) train an encoder with two terms on L2-normalised embeddings:
*alignment* pulls the views of an image together, *uniformity* spreads all embeddings
over the sphere. Nothing else is needed (no teacher, no queue), so the method is a loss.
"""

from __future__ import annotations

from itertools import combinations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hookbus import LOSSES
from hookbus.engine.config import LossConfig


class AlignUniformLoss(nn.Module):
    """``align + weight * uniform`` on ``output["embeddings"]`` (one ``[B, D]`` per view).

    ``align`` is the mean squared distance between two views of an image, over every
    pair of views; ``uniform`` is ``log mean exp(-t * d^2)`` over the distinct pairs of
    images of a view, averaged over the views. Computed per process (no gathering).
    """

    def __init__(self, t: float = 2.0, weight: float = 1.0) -> None:
        super().__init__()
        if t <= 0 or weight < 0:
            raise ValueError(f"need t > 0 and weight >= 0, got t={t}, weight={weight}")
        self.t = t
        self.weight = weight

    def forward(self, output: dict, batch: dict) -> Tensor:
        """The loss of the model's ``output`` (``batch`` is not used)."""
        views = [F.normalize(view.float(), dim=1) for view in output["embeddings"]]
        align = torch.stack(
            [(a - b).pow(2).sum(dim=1).mean() for a, b in combinations(views, 2)]
        ).mean()
        uniform = torch.stack(
            [torch.pdist(view).pow(2).mul(-self.t).exp().mean().log() for view in views]
        ).mean()
        return align + self.weight * uniform


@LOSSES.register("align_uniform", reads=())
def build_align_uniform(cfg: LossConfig) -> AlignUniformLoss:
    """:class:`AlignUniformLoss` with the paper's ``t = 2`` and equal weights."""
    return AlignUniformLoss()

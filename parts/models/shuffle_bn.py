"""Shuffled BatchNorm across ranks: a momentum encoder's forward on a random share of
the global batch (MoCo's shuffle-BN).

BatchNorm normalises each rank's batch with that batch's statistics. When the key
encoder sees exactly the images the query encoder saw, the statistics leak which
sample is which and the contrastive task gets a shortcut. Here every rank gathers the
global batch, runs the encoder on its slice of a shuffled copy of it, and gets back
the outputs of its own images in their order.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from hookbus.engine.process import distributed


def batch_permutation(size: int, *, seed: int, iteration: int) -> Tensor:
    """The shuffle of a global batch of ``size`` images at train step ``iteration``.

    A function of ``(seed, iteration)`` alone, so every rank computes the same one
    without a broadcast and a resumed run shuffles as the uninterrupted one did; it
    leaves the global random streams alone.
    """
    generator = torch.Generator().manual_seed((seed * 1_000_003 + iteration) % 2**63)
    return torch.randperm(size, generator=generator)


def shuffled_forward(
    module: nn.Module, views: list[Tensor], *, seed: int, iteration: int
) -> dict[str, Any]:
    """``module({"views": views})`` with BatchNorm statistics from a shuffled batch.

    ``views`` are this rank's views (each ``[B, ...]``, the same ``B`` on every rank).
    Each view is gathered from every rank, shuffled with :func:`batch_permutation`, and
    this rank's slice of the shuffled batch goes through ``module``; every per-view list
    of tensors in its output is gathered back, unshuffled and sliced, so entry ``i`` of
    view ``v`` belongs to this rank's image ``i`` again. In one process: the plain call.
    Call under ``torch.no_grad()``: the gathers carry no gradient.
    """
    world = distributed.world_size()
    if world == 1:
        return module({"views": views})
    size = len(views[0])
    start = distributed.rank() * size
    permutation = batch_permutation(world * size, seed=seed, iteration=iteration)
    permutation = permutation.to(views[0].device)
    mine = permutation[start : start + size]
    shuffled = [distributed.all_gather_cat(view)[mine] for view in views]
    output = module({"views": shuffled})
    back = torch.argsort(permutation)[start : start + size]
    for name, value in output.items():
        if isinstance(value, list) and all(isinstance(part, Tensor) for part in value):
            output[name] = [distributed.all_gather_cat(part)[back] for part in value]
    return output

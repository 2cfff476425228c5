"""Run by torchrun in tests/test_distributed_grads.py: one rank's loss gradient.

Every rank builds the same global batch of embeddings from a fixed seed, keeps its
shard, computes the loss with the collective (global-negatives) code path, and saves
the loss and the gradient of its shard's embeddings to OUT/rank<R>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from engine.losses.nt_xent import NTXentLoss

GLOBAL_BATCH, DIM, VIEWS = 8, 6, 2


def global_embeddings() -> list[torch.Tensor]:
    """The embeddings of every view of the global batch, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(GLOBAL_BATCH, DIM, generator=generator) for _ in range(VIEWS)]


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = GLOBAL_BATCH // world
    views = [
        view[rank * shard : (rank + 1) * shard].clone().requires_grad_(True)
        for view in global_embeddings()
    ]
    loss = NTXentLoss(temperature=0.5)({"embeddings": views}, {})
    loss.backward()
    torch.save(
        {"loss": loss.detach(), "grads": [view.grad for view in views]}, out / f"rank{rank}.pt"
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

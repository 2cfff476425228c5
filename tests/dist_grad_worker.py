"""Run by torchrun in tests/test_distributed_grads.py: one rank's loss and gradient.

    worker.py OUT LOSS_NAME

Every rank builds the same global batch of per-view outputs from a fixed seed, keeps
its shard, computes the loss (registered as LOSS_NAME, default settings) with its
collective code path, and saves the loss and the gradient of its shard to OUT/rank<R>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from hookbus.engine.config_io import validate_config
from hookbus.parts.losses import build_loss

GLOBAL_BATCH, DIM, VIEWS = 8, 6, 2
OUTPUT_KEY = {
    "nt_xent": "embeddings",
    "barlow_twins": "embeddings",
    "swav": "scores",
    "vicreg": "embeddings",
}
"""The collective losses and the output each one reads, per view ``[B, DIM]``."""


def global_embeddings() -> list[torch.Tensor]:
    """The embeddings of every view of the global batch, the same on every rank."""
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(GLOBAL_BATCH, DIM, generator=generator) for _ in range(VIEWS)]


def loss_of(name: str, views: list[torch.Tensor]) -> torch.Tensor:
    """The loss ``name`` (its default config) of these per-view outputs."""
    raw = {"loss": {"name": name}, "model": {"prototypes": {"count": DIM}}}
    loss = build_loss(validate_config(raw))
    return loss({OUTPUT_KEY[name]: views}, {})


def main(out: Path, name: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = GLOBAL_BATCH // world
    views = [
        view[rank * shard : (rank + 1) * shard].clone().requires_grad_(True)
        for view in global_embeddings()
    ]
    loss = loss_of(name, views)
    loss.backward()
    torch.save(
        {"loss": loss.detach(), "grads": [view.grad for view in views]}, out / f"rank{rank}.pt"
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])

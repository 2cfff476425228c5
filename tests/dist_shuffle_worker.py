"""Run by torchrun in tests/test_shuffle_bn.py: one rank's MoCo keys with shuffle-BN.

    dist_shuffle_worker.py OUT

Every rank builds the same encoder and global batch, keeps its shard of the batch,
runs the momentum teacher's ``on_forward`` with shuffle-BN on a fake engine, and saves
the keys (``teacher_embeddings``) to OUT/rank<R>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

from hookbus import FakeEngine, SSLEvents
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook

GLOBAL_BATCH, SEED, ITERATION = 8, 3, 5


class TinyEncoder(nn.Module):
    """A linear layer and BatchNorm per view: an image's key depends on its batch."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, batch: dict) -> dict[str, list[Tensor]]:
        return {"embeddings": [self.norm(self.linear(view)) for view in batch["views"]]}


def global_views() -> list[Tensor]:
    """The two views of the global batch, the same on every rank."""
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(GLOBAL_BATCH, 3, generator=generator) for _ in range(2)]


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = GLOBAL_BATCH // world
    # Inside the step, state.iteration counts it: the shuffle is seeded with the steps
    # done before it, ITERATION.
    engine = FakeEngine(
        train=True, iteration=ITERATION + 1, world_size=world, base_model=TinyEncoder()
    )
    MomentumTeacherHook(shuffle_bn=True, shuffle_seed=SEED).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.state.last_batch = {
        "views": [v[rank * shard : (rank + 1) * shard] for v in global_views()]
    }
    engine.state.last_output = {}
    engine.fire_event(SSLEvents.ON_FORWARD)
    torch.save(engine.state.last_output["teacher_embeddings"], out / f"rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

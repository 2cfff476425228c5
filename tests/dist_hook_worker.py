"""Run by torchrun in tests/test_distributed_hooks.py: one rank's method-hook state.

    dist_hook_worker.py OUT

Every rank builds the same global batches of per-view outputs from a fixed seed, keeps
its shard of each, runs ``STEPS`` train steps' ``on_loss_and_meter`` of the MoCo key
queue, the SwAV queue, the NNCLR support set and the DINO centering hooks on a fake
engine, and saves the hooks' state dicts to OUT/rank<R>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from hookbus import FakeEngine, SSLEvents
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.key_queue import KeyQueueHook
from hookbus.hooks.methods.nnclr_support import NnclrSupportHook
from hookbus.hooks.methods.swav_queue import SwavQueueHook

GLOBAL_BATCH, DIM, VIEWS, STEPS = 4, 3, 2, 3
QUEUE = 10
"""Fewer than the 3 steps x 2 views x 4 keys: the oldest keys have dropped out."""


def global_views(step: int) -> list[torch.Tensor]:
    """The per-view outputs of the global batch of ``step``, the same on every rank."""
    generator = torch.Generator().manual_seed(step)
    return [torch.randn(GLOBAL_BATCH, DIM, generator=generator) for _ in range(VIEWS)]


def hook_states(rank: int, world: int) -> dict[str, dict]:
    """The hooks' state after ``STEPS`` steps on this rank's shards."""
    hooks = {
        "key_queue": KeyQueueHook(QUEUE),
        "swav_queue": SwavQueueHook(QUEUE),
        "nnclr_support": NnclrSupportHook(QUEUE),
        "dino_centering": DinoCenteringHook(center_momentum=0.5),
    }
    engine = FakeEngine(train=True, train_phase_idx=0)
    for hook in hooks.values():
        hook.attach(engine)
    shard = GLOBAL_BATCH // world
    for step in range(STEPS):
        views = [view[rank * shard : (rank + 1) * shard] for view in global_views(step)]
        engine.state.last_output = {
            "teacher_embeddings": views,
            "embeddings": views,
            "teacher_scores": views,
        }
        if step == 0:
            hooks["dino_centering"].center = torch.zeros(DIM)
        engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
    return {name: hook.state_dict() for name, hook in hooks.items()}


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.save(hook_states(rank, dist.get_world_size()), out / f"rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

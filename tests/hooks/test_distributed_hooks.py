"""Method hooks with state on 2 gloo processes equal one process on the whole batch.

The MoCo key queue, the SwAV queue and the NNCLR support set gather every rank's
embeddings, the DINO center averages the teacher scores of every rank: with the batch
split over two ranks, each rank must end with the state of one process that saw the
whole batch. Every rank builds the same global batches of per-view outputs from a fixed
seed, keeps its shard of each and runs ``STEPS`` train steps' ``on_loss_and_meter`` of
the hooks on a fake engine (in the shared two-rank launch of tests/loss_reference.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from hookbus import FakeEngine, SSLEvents
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.key_queue import KeyQueueHook
from hookbus.hooks.methods.nnclr_support import NnclrSupportHook
from hookbus.hooks.methods.swav_queue import SwavQueueHook
from tests.loss_reference import on_two_ranks, two_rank_results

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


@on_two_ranks
def hook_states_on_each_rank() -> dict[str, dict]:
    return hook_states(dist.get_rank(), dist.get_world_size())


@pytest.mark.slow
def test_queues_and_center_on_two_ranks_equal_one_process() -> None:
    ranks = two_rank_results(hook_states_on_each_rank)
    expected = hook_states(rank=0, world=1)
    assert expected["key_queue"]["filled"] == QUEUE
    assert expected["swav_queue"]["filled"] == QUEUE
    # 3 steps of the first view's 4 rows into 10: full, the write position wrapped.
    assert (expected["nnclr_support"]["filled"], expected["nnclr_support"]["position"]) == (10, 2)
    assert expected["dino_centering"]["center"].abs().sum() > 0
    for rank, got in enumerate(ranks):
        for name, state in expected.items():
            assert got[name].keys() == state.keys(), name
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    assert torch.allclose(got[name][key], value, atol=1e-6), (rank, name, key)
                else:
                    assert got[name][key] == value, (rank, name, key)

"""MoCo's shuffle-BN: the key encoder normalises each image with a shuffled share of
the global batch, and every rank gets back the keys of its own images."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import Tensor, nn

from hookbus import FakeEngine, SSLEvents, load_config
from hookbus.config import Config
from hookbus.hook_set import method_hook
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.models.shuffle_bn import batch_permutation, shuffled_forward
from tests.loss_reference import on_two_ranks, two_rank_results

ROOT = Path(__file__).resolve().parents[2]
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


@on_two_ranks
def keys_on_each_rank() -> list[Tensor]:
    """This rank's MoCo keys with shuffle-BN: every rank builds the same encoder and
    global batch, keeps its shard, and runs the momentum teacher's ``on_forward`` with
    shuffle-BN on a fake engine."""
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
    return engine.state.last_output["teacher_embeddings"]


def test_the_permutation_depends_on_seed_and_iteration_only() -> None:
    first = batch_permutation(16, seed=3, iteration=5)
    torch.manual_seed(123)  # the global stream plays no part
    assert torch.equal(first, batch_permutation(16, seed=3, iteration=5))
    assert sorted(first.tolist()) == list(range(16))
    assert not torch.equal(first, batch_permutation(16, seed=3, iteration=6))
    assert not torch.equal(first, batch_permutation(16, seed=4, iteration=5))


def test_one_process_runs_the_plain_forward() -> None:
    encoder, views = TinyEncoder(), global_views()
    with torch.no_grad():
        plain = encoder({"views": views})["embeddings"]
        shuffled = shuffled_forward(encoder, views, seed=SEED, iteration=ITERATION)["embeddings"]
    for a, b in zip(plain, shuffled, strict=True):
        assert torch.equal(a, b)


def teacher(cfg: Config) -> MomentumTeacherHook:
    """The teacher hook as the method of ``cfg`` builds it."""
    hook = method_hook(cfg, "momentum_teacher")
    assert isinstance(hook, MomentumTeacherHook)
    return hook


def test_moco_turns_shuffle_bn_on_by_default_and_the_other_methods_do_not() -> None:
    moco = teacher(load_config(ROOT / "configs" / "moco_digits.yaml", ["trainer.seed=7"]))
    assert (moco.shuffle_bn, moco.shuffle_seed) == (True, 7)
    off = load_config(ROOT / "configs" / "moco_digits.yaml", ["loss.moco.shuffle_bn=false"])
    assert not teacher(off).shuffle_bn
    for method in ("byol", "dino"):
        cfg = load_config(ROOT / "configs" / f"{method}_digits.yaml")
        assert not teacher(cfg).shuffle_bn, method


@pytest.mark.slow
def test_keys_on_two_ranks_use_the_statistics_of_their_shuffled_share() -> None:
    ranks = two_rank_results(keys_on_each_rank)
    shard = GLOBAL_BATCH // 2
    permutation = batch_permutation(GLOBAL_BATCH, seed=SEED, iteration=ITERATION)
    position = torch.argsort(permutation)  # where each image sits in the shuffled batch
    encoder, views = TinyEncoder(), global_views()
    mixed = 0
    for rank, keys in enumerate(ranks):
        for view, key in zip(views, keys, strict=True):
            with torch.no_grad():
                local = encoder({"views": [view[rank * shard : (rank + 1) * shard]]})
            for i in range(shard):
                slot = int(position[rank * shard + i])
                share = permutation[slot // shard * shard : (slot // shard + 1) * shard]
                with torch.no_grad():
                    expected = encoder({"views": [view[share]]})["embeddings"][0][slot % shard]
                torch.testing.assert_close(key[i], expected)
                mixed += not torch.allclose(key[i], local["embeddings"][0][i])
    assert mixed > 0  # the shuffle moved images into the other rank's BatchNorm batch

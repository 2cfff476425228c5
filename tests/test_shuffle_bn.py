"""MoCo's shuffle-BN: the key encoder normalises each image with a shuffled share of
the global batch, and every rank gets back the keys of its own images."""

from __future__ import annotations

from pathlib import Path

import torch

from hookbus import load_config
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.hooks.methods.shuffle_bn import batch_permutation, shuffled_forward
from tests.dist_shuffle_worker import GLOBAL_BATCH, ITERATION, SEED, TinyEncoder, global_views
from tests.torchrun import torchrun

ROOT = Path(__file__).resolve().parents[1]


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


def test_moco_turns_shuffle_bn_on_by_default_and_the_other_methods_do_not() -> None:
    moco = MomentumTeacherHook.from_config(
        load_config(ROOT / "configs" / "moco_digits.yaml", ["trainer.seed=7"])
    )
    assert (moco.shuffle_bn, moco.shuffle_seed) == (True, 7)
    off = load_config(ROOT / "configs" / "moco_digits.yaml", ["loss.moco.shuffle_bn=false"])
    assert not MomentumTeacherHook.from_config(off).shuffle_bn
    for method in ("byol", "dino"):
        cfg = load_config(ROOT / "configs" / f"{method}_digits.yaml")
        assert not MomentumTeacherHook.from_config(cfg).shuffle_bn, method


def test_keys_on_two_ranks_use_the_statistics_of_their_shuffled_share(tmp_path: Path) -> None:
    torchrun(str(ROOT / "tests" / "dist_shuffle_worker.py"), str(tmp_path), timeout=180)

    shard = GLOBAL_BATCH // 2
    permutation = batch_permutation(GLOBAL_BATCH, seed=SEED, iteration=ITERATION)
    position = torch.argsort(permutation)  # where each image sits in the shuffled batch
    encoder, views = TinyEncoder(), global_views()
    mixed = 0
    for rank in range(2):
        keys = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
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

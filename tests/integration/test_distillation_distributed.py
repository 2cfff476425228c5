"""Distillation on two gloo ranks: FSDP trains the student of DDP (the teacher, no
submodule, is neither wrapped nor sharded), and the queue of teacher embeddings, gathered
from both ranks, is the same under both; DDP on two ranks trains the student of one
process on the global batch, queue included.

The runs (tests/integration/fsdp_job.py, recipe ``distillation_digits`` on the tiny data:
:data:`~tests.integration.fsdp_job.DISTILLATION`) are made once for the module, in one
torchrun launch. Tolerance 1e-6 (absolute), as in test_fsdp_methods.py: on two ranks the
reduce-scatter adds the same two gradients as DDP's all-reduce.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from hookbus.engine.config import BackboneConfig
from hookbus.parts.models import BACKBONES
from tests.integration.test_fsdp import _launch
from tests.torchrun import python

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ddp`` and ``fsdp``: 2 epochs on two ranks (``*.pt``: the whole final weights)."""
    root = tmp_path_factory.mktemp("distillation")
    torch.manual_seed(0)
    teacher = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=32))
    torch.save(teacher.state_dict(), root / "teacher.pth")
    specs = [
        {
            "dir": root / strategy,
            "epochs": 2,
            "strategy": strategy,
            "recipe": "distillation_digits",
            "overrides": [f"loss.distillation.teacher.weights={root / 'teacher.pth'}"],
            "weights": str(root / f"{strategy}.pt"),
        }
        for strategy in ("ddp", "fsdp")
    ]
    _launch(*specs)
    return root


def test_two_fsdp_ranks_train_the_student_of_two_ddp_ranks(runs: Path) -> None:
    ddp = torch.load(runs / "ddp.pt", weights_only=True)
    fsdp = torch.load(runs / "fsdp.pt", weights_only=True)
    assert ddp.keys() == fsdp.keys()
    assert {key.split(".")[0] for key in ddp} == {"backbone", "projection", "patch_projection"}
    for key, value in ddp.items():
        if value.is_floating_point():
            assert float((fsdp[key].double() - value.double()).abs().max()) <= 1e-6, key


def test_the_queue_and_teacher_digest_are_the_same_under_fsdp_and_ddp(runs: Path) -> None:
    ddp, fsdp = (
        load_whole_checkpoint(runs / name / POINTER_NAME)["hooks"]["distillation_teacher"]
        for name in ("ddp", "fsdp")
    )
    assert ddp["teacher"] == fsdp["teacher"]
    assert (ddp["position"], ddp["filled"]) == (fsdp["position"], fsdp["filled"])
    assert float((ddp["queue"] - fsdp["queue"]).abs().max()) <= 1e-6


STILL = (
    "data.augment.crop_area=[1.0,1.0]",
    "data.augment.crop_aspect=[1.0,1.0]",
    "data.augment.shift=0.0",
    "data.augment.rotation=0.0",
    "data.augment.contrast=[1.0,1.0]",
    "data.augment.brightness=0.0",
    "data.augment.noise_std=0.0",
    "data.augment.erase_prob=0.0",
    "model.backbone.width=32",  # the small CNN's default: not set for the ViT
    "model.backbone.name=vit_tiny",
    "model.backbone.vit.patch_size=2",
    "model.backbone.vit.width=8",
    "model.backbone.vit.depth=1",
    "model.backbone.vit.heads=2",
    "model.backbone.vit.mlp_dim=16",
    "optimizer.name=sgd",
)
"""Views equal to the images (no random draw: a batch's views then do not depend on
how the global batch is split into the ranks' batches) and a student without BatchNorm
(a one-block ViT: LayerNorm is per image; SyncBatchNorm needs CUDA): two ranks of 4
images a step then compute what one process of 8 does. The teacher, a small CNN, runs in
eval mode (its BatchNorm's running statistics, per image too). SGD, not AdamW: the
attention's key bias has a zero gradient (softmax ignores a shift of every score), so
its computed gradient is rounding noise, which Adam's normalisation turns into steps of
the learning rate's size that differ with the order of the sums."""


@pytest.fixture(scope="module")
def ddp_and_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``two``: 2 epochs on two gloo ranks, 4 images each a step; ``one``: the same in one
    process, 8 images a step (``*.pt``: the final weights)."""
    root = tmp_path_factory.mktemp("distillation_ddp")
    torch.manual_seed(0)
    teacher = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=32))
    torch.save(teacher.state_dict(), root / "teacher.pth")
    overrides = [f"loss.distillation.teacher.weights={root / 'teacher.pth'}", *STILL]
    spec = {"epochs": 2, "strategy": "ddp", "recipe": "distillation_digits"}
    _launch({**spec, "dir": root / "two", "overrides": overrides, "weights": str(root / "two.pt")})
    one = {**spec, "dir": str(root / "one"), "overrides": [*overrides, "data.batch_size=8"]}
    python(
        "-m", "tests.integration.fsdp_job", json.dumps([one | {"weights": str(root / "one.pt")}])
    )
    return root


def test_two_ddp_ranks_train_the_student_of_one_process(ddp_and_one: Path) -> None:
    one = torch.load(ddp_and_one / "one.pt", weights_only=True)
    two = torch.load(ddp_and_one / "two.pt", weights_only=True)
    assert one.keys() == two.keys()
    moved = 0.0
    for key, value in one.items():
        if value.is_floating_point():
            assert float((two[key].double() - value.double()).abs().max()) <= 1e-6, key
    start = torch.load(ddp_and_one / "teacher.pth", weights_only=True)  # not the student's
    assert start.keys().isdisjoint(one.keys())
    rows = [
        json.loads(line) for line in (ddp_and_one / "one" / "metrics.json").read_text().splitlines()
    ]
    pair = [
        json.loads(line) for line in (ddp_and_one / "two" / "metrics.json").read_text().splitlines()
    ]
    assert [row["iteration"] for row in rows] == [row["iteration"] for row in pair] == [3, 6]
    for row, other in zip(rows, pair, strict=True):
        moved = max(moved, abs(row["loss"] - other["loss"]))
    assert moved <= 1e-6


def test_the_queue_on_two_ddp_ranks_holds_one_process_queue(ddp_and_one: Path) -> None:
    one, two = (
        load_whole_checkpoint(ddp_and_one / name / POINTER_NAME)["hooks"]["distillation_teacher"]
        for name in ("one", "two")
    )
    assert one["teacher"] == two["teacher"]
    assert (one["position"], one["filled"]) == (two["position"], two["filled"])
    # The rows of a step come in rank order on two ranks (rank 0's images 0, 2, 4, 6 of
    # the global batch, then rank 1's) and in batch order in one process: the same rows.
    for queue in (one["queue"], two["queue"]):
        assert queue.shape[0] == 24
    sort = lambda queue: queue[torch.argsort(queue[:, 0])]  # noqa: E731
    assert float((sort(one["queue"]) - sort(two["queue"])).abs().max()) <= 1e-6

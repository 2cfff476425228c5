"""Distillation on two gloo ranks: FSDP trains the student of DDP (the teacher, no
submodule, is neither wrapped nor sharded), and the queue of teacher embeddings, gathered
from both ranks, is the same under both.

The runs (tests/integration/fsdp_job.py, recipe ``distillation_digits`` on the tiny data:
:data:`~tests.integration.fsdp_job.DISTILLATION`) are made once for the module, in one
torchrun launch. Tolerance 1e-6 (absolute), as in test_fsdp_methods.py: on two ranks the
reduce-scatter adds the same two gradients as DDP's all-reduce.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from hookbus.engine.config import BackboneConfig
from hookbus.parts.models import BACKBONES
from tests.integration.test_fsdp import _launch

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

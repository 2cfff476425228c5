"""A checkpoint written before hookbus moved into one namespace (top-level ``engine``,
``hooks`` and ``steps`` packages, commit c28230b) resumes bit for bit.

The file in tests/data was written by that code: a MoCo run on the tiny data, two epochs,
iteration checkpoints every 2 train iterations, stopped after train iteration 5; the
newest checkpoint is phase 2 (the second train phase) after its first batch. A checkpoint
holds tensors, numbers, strings and the config as plain data, with no module paths, so
the move does not touch it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from hookbus import SSLTrainer
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.defaults import method_hooks
from tests.conftest import tiny_config

OLD_RUN = Path(__file__).parent / "data" / "checkpoint_0.1_before_namespace"


def run(run_dir: Path) -> Any:
    cfg = tiny_config(
        run_dir,
        loss={"name": "moco", "moco": {"queue_size": 20}},
        optimizer={"num_epochs": 2, "warmup_epochs": 0},
        checkpoint={"iter_frequency": 2, "phase_frequency": 0, "keep_last": 1},
    )
    return SSLTrainer(cfg, hooks=[*method_hooks(cfg), CheckpointHook.from_config(cfg)]).train()


def test_a_checkpoint_from_before_the_move_resumes_bit_for_bit(tmp_path: Path) -> None:
    straight = run(tmp_path / "straight")
    shutil.copytree(OLD_RUN, tmp_path / "resumed")
    resumed = run(tmp_path / "resumed")
    assert resumed.resumed_from.endswith("phase00002_batch0000001.torch")
    assert resumed.iteration == straight.iteration == 6
    for name, weight in straight.base_model.state_dict().items():
        assert torch.equal(weight, resumed.base_model.state_dict()[name]), name
    queue, queue_again = (
        next(hook for hook in state.hooks if hook.name == "key_queue").state_dict()
        for state in (straight, resumed)
    )
    assert queue["position"] == queue_again["position"]
    assert torch.equal(queue["keys"], queue_again["keys"])

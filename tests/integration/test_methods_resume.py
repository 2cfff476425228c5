"""Each method's hook state survives a stop and resume at a phase boundary, bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer
from hookbus.hook_set import method_hooks
from hookbus.hooks.checkpoint import CheckpointHook
from tests.conftest import tiny_config

MULTI_CROP = {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}}

MASKED_VIT = {
    "backbone": {
        "name": "vit_tiny",
        "vit": {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16},
    },
    "head": {"dims": ["backbone", 16, 8]},
    "prototypes": {"count": 12, "weight_norm": True},
}
"""iBOT's and DINOv2's tiny ViT (a 4x4 grid of 2x2 patches on the 8 px views)."""

METHODS: dict[str, dict[str, dict]] = {
    "moco": {"loss": {"name": "moco", "moco": {"queue_size": 20}}},
    "moco_v3": {"loss": {"name": "moco_v3"}, "model": {"predictor": {"dims": [8, 16, 8]}}},
    "byol": {
        "loss": {"name": "byol"},
        "model": {"predictor": {"dims": [8, 16, 8]}},
    },
    "swav": {
        "loss": {
            "name": "swav",
            "swav": {"queue_size": 16, "queue_start_epoch": 1, "freeze_prototypes_iterations": 2},
        },
        "model": {"prototypes": {"count": 5}},
        "data": MULTI_CROP,
    },
    "dino": {
        "loss": {
            "name": "dino",
            "dino": {"warmup_teacher_epochs": 2, "teacher_temperature": 0.07},
        },
        "model": {"prototypes": {"count": 12, "weight_norm": True}},
        "data": MULTI_CROP,
    },
    # masks from torch's generator, a teacher given the student's masks, heads, and
    # (ibot) the class and patch centers
    "dinov2": {
        "loss": {"name": "dinov2", "dino": {"warmup_teacher_epochs": 2}},
        "model": MASKED_VIT,
        "data": MULTI_CROP,
    },
    "ibot": {
        "loss": {
            "name": "ibot",
            "ibot": {"separate_head": True, "patch_prototypes": 6, "mask_probability": 1.0},
        },
        "model": MASKED_VIT,
        "data": MULTI_CROP,
    },
    # DINOv3's adaptation phase from the second epoch: the resume starts it (larger
    # views, and a high-resolution Gram teacher at a larger side still)
    "dinov3_adaptation": {
        "loss": {
            "name": "dinov3",
            "dinov3": {
                "gram_start": 1,
                "gram_image_size": 12,
                "adaptation_epoch": 2,
                "adaptation_image_size": 12,
                "adaptation_small_size": 8,
                "adaptation_gram_image_size": 16,
            },
        },
        "model": MASKED_VIT,
        "data": MULTI_CROP,
    },
    "barlow_twins": {"loss": {"name": "barlow_twins"}},
    "vicreg": {"loss": {"name": "vicreg"}},
    "simsiam": {"loss": {"name": "simsiam"}, "model": {"predictor": {"dims": [8, 4, 8]}}},
    # one view, patches masked from torch's generator (its state is in the checkpoint)
    "mae": {
        "loss": {"name": "mae"},
        "model": {
            "backbone": {
                "name": "vit_tiny",
                "vit": {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16},
            },
            "head": {},  # MAE builds no projection head: the tiny config's is dropped
            "mae_decoder": {"width": 8, "depth": 1, "heads": 2},
        },
        "data": {"num_views": 1},
    },
    # a support set of 20 rows, full and wrapped around by the second epoch
    "nnclr": {
        "loss": {"name": "nnclr", "nnclr": {"queue_size": 20}},
        "model": {"predictor": {"dims": [8, 16, 8]}},
    },
}


class Stop(Exception):
    """The simulated crash."""


class StopAfterPhase(Hook):
    """Raises at the end of phase ``phase_idx``, after its checkpoint is written."""

    priority = 200

    def __init__(self, phase_idx: int) -> None:
        super().__init__()
        self.phase_idx = phase_idx

    def on_phase_end(self, engine: Engine) -> None:
        if engine.state.phase_idx == self.phase_idx:
            raise Stop(f"stopped after phase {self.phase_idx}")


def run(run_dir: Path, method: str, *extra: Hook) -> Any:
    """Two epochs of ``method`` on the tiny data (train, test, train, test phases)."""
    sections = {key: dict(value) for key, value in METHODS[method].items()}
    model = {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}, **sections.pop("model", {})}
    optimizer = {"num_epochs": 2, "warmup_epochs": 0}
    cfg = tiny_config(run_dir, model=model, optimizer=optimizer, **sections)
    hooks = [*method_hooks(cfg), CheckpointHook(run_dir), *extra]
    return SSLTrainer(cfg, hooks=hooks).train()


def assert_equal_states(first: Any, second: Any, where: str) -> None:
    if isinstance(first, torch.Tensor):
        assert torch.equal(first, second), where
    elif isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            assert_equal_states(first[key], second[key], f"{where}.{key}")
    else:
        assert first == second, where


@pytest.mark.parametrize("method", sorted(METHODS))
def test_resumed_run_ends_with_the_hook_state_and_weights_of_a_straight_run(
    tmp_path: Path, method: str
) -> None:
    straight = run(tmp_path / "straight", method)
    with pytest.raises(Stop):
        run(tmp_path / "resumed", method, StopAfterPhase(1))  # after the first test phase
    resumed = run(tmp_path / "resumed", method)
    assert resumed.resumed_from is not None
    assert resumed.iteration == straight.iteration == 6
    assert_equal_states(straight.base_model.state_dict(), resumed.base_model.state_dict(), "model")
    hooks = {hook.name: hook.state_dict() for hook in straight.hooks if hook.has_state()}
    again = {hook.name: hook.state_dict() for hook in resumed.hooks if hook.has_state()}
    assert_equal_states(hooks, again, "hooks")
    assert hooks or method in ("barlow_twins", "vicreg", "simsiam", "mae"), (
        "a method with hooks keeps their state"
    )


def test_ibots_centers_and_teacher_are_in_the_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(Stop):
        run(tmp_path / "ibot", "ibot", StopAfterPhase(0))
    checkpoint = torch.load(tmp_path / "ibot" / "checkpoint.torch", weights_only=True)
    hooks = checkpoint["hooks"]
    assert hooks["dino_centering"]["center"].shape == (12,)
    assert hooks["patch_centering"]["center"].shape == (6,)  # the separate head's outputs
    assert "patch_prototypes.weight" in hooks["momentum_teacher"]["teacher"]


def test_every_stateful_method_hook_is_in_the_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(Stop):
        run(tmp_path / "dino", "dino", StopAfterPhase(0))
    checkpoint = torch.load(tmp_path / "dino" / "checkpoint.torch", weights_only=True)
    assert {"momentum_teacher", "dino_centering"} <= set(checkpoint["hooks"])
    assert checkpoint["hooks"]["dino_centering"]["center"].shape == (12,)

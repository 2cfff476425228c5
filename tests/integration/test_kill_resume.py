"""SIGKILL a real training process at random moments; the resumed run is bit-identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hookbus.engine.config import BackboneConfig
from hookbus.parts.models import BACKBONES
from tests.kill_harness import Outcome, kill_campaign


def campaign(workdir: Path, kills: int, **options: Any) -> Outcome:
    """:func:`kill_campaign` with the uninterrupted run trained in this process: the
    killed and resumed runs are ``hookbus train`` processes, which must end with the
    same bits as the command run once here."""
    return kill_campaign(workdir, kills, reference_here=True, **options)


def assert_identical(outcome: Outcome, kills: int) -> None:
    assert outcome.kills == kills, outcome.notes
    assert outcome.identical_parameters
    assert outcome.identical_losses
    assert outcome.identical_metrics_file
    assert outcome.identical_iteration


MOCO = {"loss": {"name": "moco", "moco": {"queue_size": 32}}}
"""MoCo: a key encoder and a queue of keys, both in every checkpoint, beside what every
run checkpoints (weights, optimizer, schedules, random streams, the loaders' place)."""


@pytest.mark.slow
def test_a_run_killed_three_times_and_resumed_equals_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    outcome = campaign(tmp_path, kills=3, seed=1, epochs=24, sections=MOCO)
    assert_identical(outcome, kills=3)


TINY_VIT = {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16}
"""A ViT of one block on the 8 px views: a 4x4 grid of patches."""

METHODS = {
    # a support set of nearest neighbours, in every checkpoint
    "nnclr": {
        "loss": {"name": "nnclr", "nnclr": {"queue_size": 32}},
        "model": {"predictor": {"dims": [8, 16, 8]}},
    },
    # one view, patches masked from torch's generator, whose state is in every checkpoint
    "mae": {
        "loss": {"name": "mae"},
        "model": {
            "backbone": {
                "name": "vit_tiny",
                "vit": {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16},
            },
            "head": {},  # MAE builds no projection head: the recipe's is dropped
            "mae_decoder": {"width": 8, "depth": 1, "heads": 2},
        },
        "data": {"num_views": 1},
    },
    # a target encoder (the teacher), a predictor, and block masks made in the collate
    "ijepa": {
        "loss": {"name": "ijepa", "ijepa": {"min_context_patches": 2}},
        "model": {
            "backbone": {
                "name": "vit_tiny",
                "vit": {"patch_size": 2, "width": 8, "depth": 1, "heads": 2, "mlp_dim": 16},
            },
            "head": {},  # I-JEPA builds no projection head: the recipe's is dropped
            "ijepa_predictor": {"width": 8, "depth": 1, "heads": 2},
        },
        "data": {"num_views": 1},
    },
    # block masks from torch's generator, a teacher fed the student's masks, the heads
    "dinov2": {
        "loss": {"name": "dinov2"},
        "model": {
            "backbone": {"name": "vit_tiny", "vit": TINY_VIT},
            "head": {"dims": ["backbone", 16, 8]},
            "prototypes": {"count": 12, "weight_norm": True},
        },
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
    # the same with a separate patch head and the class and patch centers
    "ibot": {
        "loss": {"name": "ibot", "ibot": {"separate_head": True, "patch_prototypes": 6}},
        "model": {
            "backbone": {"name": "vit_tiny", "vit": TINY_VIT},
            "head": {"dims": ["backbone", 16, 8]},
            "prototypes": {"count": 12, "weight_norm": True},
        },
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
    # DINOv2's, plus a Gram teacher taken and refreshed, and a RoPE ViT jittered from
    # torch's generator
    "dinov3": {
        "loss": {
            "name": "dinov3",
            "dinov3": {
                "gram_start": 5,
                "gram_update_every": 6,
                "gram_first_update": 9,
                "gram_max_updates": 3,
            },
        },
        "model": {
            "backbone": {
                "name": "vit_tiny",
                "vit": {**TINY_VIT, "position_embedding": "rope", "rope_jitter": 1.5},
            },
            "head": {"dims": ["backbone", 16, 8]},
            "prototypes": {"count": 12, "weight_norm": True},
        },
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
    # DINOv3's adaptation phase from epoch 7 of 12: the kill falls in the first half of
    # training, so the resumed run starts the phase (larger views and Gram teacher)
    "dinov3_adaptation": {
        "loss": {
            "name": "dinov3",
            "dinov3": {
                "gram_start": 5,
                "gram_image_size": 12,
                "adaptation_epoch": 7,
                "adaptation_image_size": 12,
                "adaptation_small_size": 8,
                "adaptation_gram_image_size": 16,
            },
        },
        "model": {
            "backbone": {"name": "vit_tiny", "vit": TINY_VIT},
            "head": {"dims": ["backbone", 16, 8]},
            "prototypes": {"count": 12, "weight_norm": True},
        },
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
    # SIGReg's directions from torch's generator, no teacher
    "lejepa": {
        "loss": {"name": "lejepa", "lejepa": {"slices": 16}},
        "model": {
            "backbone": {"name": "vit_tiny", "vit": TINY_VIT},
            "head": {"dims": ["backbone", 16, 8]},
        },
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
    # a teacher, a center and multi-crop views
    "dino": {
        "loss": {"name": "dino"},
        "model": {"prototypes": {"count": 12, "weight_norm": True}},
        "data": {"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(METHODS))
def test_killed_method_run_with_hook_state_equals_an_uninterrupted_one(
    tmp_path: Path, method: str
) -> None:
    # One kill each: several kills in a row (on MoCo) are the test above's; this one
    # checks that each method's own state resumes from a checkpoint of a killed process
    outcome = campaign(tmp_path, kills=1, seed=2, epochs=12, sections=METHODS[method])
    assert_identical(outcome, kills=1)


def _backbone_file(path: Path, width: int) -> Path:
    """A small CNN's weights (seed 7), saved where a recipe reads them."""
    torch.manual_seed(7)
    net = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=width))
    torch.save(net.state_dict(), path)
    return path


@pytest.mark.slow
def test_killed_distillation_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    # a frozen teacher from a file (never in the checkpoint, its SHA-256 is) and the
    # queue of its embeddings (in every checkpoint)
    teacher = _backbone_file(tmp_path / "teacher.pth", width=8)
    sections = {
        "loss": {
            "name": "distillation",
            "distillation": {
                "mode": "both",
                "queue_size": 24,
                "teacher": {"name": "small_cnn", "width": 8, "weights": str(teacher)},
            },
        },
        "model": {"backbone": {"width": 4}, "head": {}},  # a linear projection, no head
    }
    outcome = campaign(tmp_path, kills=1, seed=3, epochs=12, sections=sections)
    assert_identical(outcome, kills=1)


@pytest.mark.slow
def test_killed_run_started_from_weights_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    # the backbone loaded at the start only: the resume takes the checkpoint's weights
    start = _backbone_file(tmp_path / "start.pth", width=4)
    sections = {"model": {"backbone": {"width": 4, "weights": str(start)}}}
    outcome = campaign(tmp_path, kills=1, seed=4, epochs=12, sections={**MOCO, **sections})
    assert_identical(outcome, kills=1)

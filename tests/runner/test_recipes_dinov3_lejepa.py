"""The DINOv3 and LeJEPA recipes: each validates with its method's hooks and model, and
the image-folder ViT-S/16 recipes train a step on generated images with the real
backbone (DINOv3's with RoPE, registers and its high-resolution Gram teacher)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer, default_hooks, load_config
from hookbus.parts.models import build_model
from hookbus.parts.models.masked_distillation import MaskedDistillationModel
from tests.runner.test_recipes_masked_distillation import generated_folder

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DINOV3_HOOKS = {"momentum_teacher", "dino_centering", "freeze_prototypes", "gram_teacher"}
SMALL = [
    "data.folder.test_dir=null",
    "data.image_size=32",  # the ViT-S/16 as shipped, on a 2x2 grid
    "data.small_views.size=16",
    "data.small_views.count=2",
    "data.batch_size=4",
    "data.num_workers=0",
    "data.pin_memory=false",
    "model.amp.enabled=false",
    "optimizer.num_epochs=1",
    "trainer.test_model=false",
]


def test_the_dinov3_digits_recipe_builds_with_its_hooks_and_without_gram() -> None:
    cfg = load_config(CONFIGS / "dinov3_digits_vit_tiny.yaml")
    assert {hook.name for hook in default_hooks(cfg)} >= DINOV3_HOOKS
    assert isinstance(build_model(cfg), MaskedDistillationModel)
    plain = load_config(CONFIGS / "dinov3_digits_vit_tiny.yaml", ["loss.dinov3.gram_weight=0"])
    assert "gram_teacher" not in {hook.name for hook in default_hooks(plain)}


def test_the_lejepa_digits_recipe_builds_a_projector_on_vit_tiny() -> None:
    cfg = load_config(CONFIGS / "lejepa_digits_vit_tiny.yaml")
    model = build_model(cfg)
    assert model.encode(torch.zeros(2, 1, 16, 16)).shape == (2, 64)
    assert not {hook.name for hook in default_hooks(cfg)} & {"momentum_teacher"}


def test_the_dinov3_vit_s16_recipe_trains_a_step_with_rope_registers_and_gram(
    tmp_path: Path,
) -> None:
    cfg = load_config(
        CONFIGS / "dinov3_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={generated_folder(tmp_path)}",
            *SMALL,
            "model.prototypes.count=1024",
            "loss.ibot.patch_prototypes=1024",
            "loss.dinov3.gram_start=0",
            "loss.dinov3.gram_image_size=64",  # twice the side: a 4x4 grid resized to 2x2
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    hooks = [hook for hook in default_hooks(cfg) if hook.name in DINOV3_HOOKS]
    state = SSLTrainer(cfg, hooks=hooks).train()
    assert state.iteration == 1 and bool(state.loss.isfinite())
    backbone = state.base_model.backbone
    assert backbone.encoder.pos_embedding is None and backbone.registers == 4
    output = state.last_output
    assert output["gram_weight"] == 2.0
    assert output["gram_teacher_patch_tokens"].shape == output["patch_tokens"].shape == (8, 4, 384)


def test_the_lejepa_vit_s16_recipe_trains_a_step_on_generated_images(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "lejepa_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={generated_folder(tmp_path)}",
            *SMALL,
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    state = SSLTrainer(cfg, hooks=[]).train()
    assert state.iteration == 1 and bool(state.loss.isfinite())
    assert state.base_model.backbone.out_dim == 384
    assert [len(view) for view in state.last_output["embeddings"]] == [4, 4, 4, 4]
    assert state.last_output["embeddings"][0].shape[1] == 64


@pytest.mark.parametrize("recipe", ["dinov3_imagefolder_vit_s16", "lejepa_imagefolder_vit_s16"])
def test_the_image_folder_recipes_validate_as_shipped(recipe: str) -> None:
    cfg = load_config(CONFIGS / f"{recipe}.yaml")
    assert cfg.model.backbone.name == "vit_s16" and cfg.model.amp.dtype == "bf16"

"""The DINOv2 and iBOT recipes: each validates with its method's hooks and model, and the
image-folder ViT-S/16 recipe trains a step on generated images with the real backbone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from hookbus import SSLTrainer, default_hooks, load_config
from hookbus.parts.models import build_model
from hookbus.parts.models.masked_distillation import MaskedDistillationModel

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
HOOKS = {
    "dinov2": {"momentum_teacher", "dino_centering", "freeze_prototypes"},
    "ibot": {"momentum_teacher", "dino_centering", "patch_centering", "freeze_prototypes"},
}


@pytest.mark.parametrize("method", sorted(HOOKS))
def test_digits_recipe_builds_on_vit_tiny_with_its_method_hooks(method: str) -> None:
    cfg = load_config(CONFIGS / f"{method}_digits.yaml")
    names = {hook.name for hook in default_hooks(cfg)}
    assert HOOKS[method] <= names
    assert method == "ibot" or "patch_centering" not in names  # Sinkhorn-Knopp: no center
    assert cfg.meters.knn.enabled and cfg.hooks.evaluation_report.enabled
    model = build_model(cfg)
    assert isinstance(model, MaskedDistillationModel)
    assert model.encode(torch.zeros(2, 1, 16, 16)).shape == (2, 64)


def test_the_vit_s16_recipe_has_the_papers_settings() -> None:
    cfg = load_config(CONFIGS / "dinov2_imagefolder_vit_s16.yaml")
    loss, optimizer = cfg.loss, cfg.optimizer
    assert (cfg.model.backbone.name, cfg.model.prototypes.count) == ("vit_s16", 65536)
    assert (loss.dinov2.centering, loss.dinov2.koleo_weight) == ("sinkhorn_knopp", 0.1)
    assert (loss.ibot.mask_probability, loss.ibot.mask_ratio) == (0.5, (0.1, 0.5))
    assert (loss.dino.momentum, loss.dino.warmup_teacher_epochs) == (0.992, 30)
    assert (optimizer.weight_decay, optimizer.weight_decay_end) == (0.04, 0.4)
    assert (cfg.data.small_views.count, cfg.data.small_views.size) == (8, 96)
    assert (loss.dinov2.layer_decay, loss.dinov2.patch_embedding_lr_scale) == (0.9, 0.2)
    vit = cfg.model.backbone.vit
    assert (vit.layer_scale, vit.drop_path, vit.drop_path_rule) == (1e-5, 0.1, "uniform")


def generated_folder(root: Path) -> Path:
    """``root/images``: two class folders of two generated RGB images each."""
    generator = torch.Generator().manual_seed(0)
    for label in ("a", "b"):
        (root / "images" / label).mkdir(parents=True)
        for index in range(2):
            pixels = torch.randint(0, 256, (36, 40 + index, 3), generator=generator)
            Image.fromarray(pixels.to(torch.uint8).numpy()).save(
                root / "images" / label / f"{index}.png"
            )
    return root / "images"


def test_the_vit_s16_recipe_trains_a_step_on_generated_images(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "dinov2_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={generated_folder(tmp_path)}",
            "data.folder.test_dir=null",
            # ViT-S/16 as shipped on 32 px views (a 2x2 grid) and 16 px local ones.
            "data.image_size=32",
            "data.small_views.size=16",
            "data.batch_size=4",
            "data.num_workers=0",
            "data.pin_memory=false",
            "model.prototypes.count=1024",
            "model.amp.enabled=false",
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    hooks = [hook for hook in default_hooks(cfg) if hook.name in HOOKS["dinov2"]]
    state = SSLTrainer(cfg, hooks=hooks).train()
    assert state.iteration == 1
    assert bool(state.loss.isfinite())
    assert state.base_model.backbone.out_dim == 384
    blocks = state.base_model.backbone.encoder.layers
    assert [block.rate for block in blocks] == [0.1] * 12  # the same rate in every block
    scales = [block.layer_scale_1.detach() for block in blocks]  # from 1e-5, a step on
    assert len(scales) == 12 and all(not torch.equal(s, torch.full((384,), 1e-5)) for s in scales)
    output = state.last_output
    assert len(output["teacher_scores"]) == 2 and len(output["scores"]) == 10
    assert output["teacher_patch_scores"].shape == output["patch_scores"].shape


def test_the_ibot_vit_s16_recipe_trains_a_step_on_generated_images(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "ibot_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={generated_folder(tmp_path)}",
            "data.folder.test_dir=null",
            "data.image_size=32",  # ViT-S/16 as shipped, on a 2x2 grid
            "data.small_views.size=16",
            "data.small_views.count=2",
            "data.batch_size=4",
            "data.num_workers=0",
            "data.pin_memory=false",
            "model.prototypes.count=1024",
            "model.amp.enabled=false",
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    hooks = [hook for hook in default_hooks(cfg) if hook.name in HOOKS["ibot"]]
    state = SSLTrainer(cfg, hooks=hooks).train()
    assert state.iteration == 1
    assert bool(state.loss.isfinite())
    head = state.base_model.head.layers
    assert [type(layer).__name__ for layer in head] == [
        "Linear",
        "GELU",
        "Linear",
        "GELU",
        "Linear",
    ]
    assert not state.base_model.prototypes.weight_norm
    assert len(state.last_output["scores"]) == 4

"""The I-JEPA recipes: the digits one builds its parts, the ViT-S/16 image-folder one
keeps the paper's settings and trains a step on generated 224 px images."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, Priority, SSLTrainer, default_hooks, load_config
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.models import build_model
from hookbus.parts.models.ijepa import JepaModel
from hookbus.parts.models.patch_grid import patch_grid
from hookbus.recipes_index import recipe_paths
from tests.runner.test_recipes import small_folder

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class Shapes(Hook):
    """Records the shapes of the masks and of the target encoder's tokens at the loss."""

    priority = Priority.REPORT

    def on_loss_and_meter(self, engine: Engine) -> None:
        state = engine.state
        self.shapes = (
            tuple(state.last_batch["target_keep"].shape),
            tuple(state.last_batch["context_keep"].shape),
            tuple(state.last_output["teacher_embeddings"][0].shape),
        )


def test_the_digits_recipe_builds_a_jepa_on_vit_tiny_in_2x2_patches() -> None:
    cfg = load_config(CONFIGS / "ijepa_digits_vit_tiny.yaml")
    assert (cfg.loss.name, cfg.data.num_views, cfg.model.backbone.name) == ("ijepa", 1, "vit_tiny")
    assert patch_grid(cfg) == (8, 8)
    teachers = [hook for hook in default_hooks(cfg) if isinstance(hook, MomentumTeacherHook)]
    assert [teacher.schedule for teacher in teachers] == ["linear"]
    assert cfg.meters.knn.enabled and cfg.hooks.evaluation_report.enabled
    model = build_model(cfg)
    assert isinstance(model, JepaModel)
    assert model.encode(torch.zeros(2, 1, 16, 16)).shape == (2, 64)


def test_the_vit_s16_recipe_trains_a_step_on_generated_224_px_images(tmp_path: Path) -> None:
    cfg = load_config(
        CONFIGS / "ijepa_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={small_folder(tmp_path, per_class=1)}",
            "data.folder.test_dir=null",
            "data.batch_size=2",
            "data.num_workers=0",
            "data.pin_memory=false",
            "model.amp.enabled=false",  # bf16 on CPU is slow
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    # The paper's settings, as shipped: the backbone, predictor, blocks and view.
    assert (cfg.model.backbone.name, cfg.data.image_size) == ("vit_s16", 224)
    predictor = cfg.model.ijepa_predictor
    assert (predictor.width, predictor.depth) == (384, 12)
    blocks = cfg.loss.ijepa
    assert (blocks.target_blocks, blocks.target_scale, blocks.context_scale) == (
        4,
        (0.15, 0.2),
        (0.85, 1.0),
    )
    assert (blocks.target_aspect_ratio, blocks.min_context_patches) == ((0.75, 1.5), 10)
    assert (blocks.momentum, blocks.final_momentum, blocks.distance) == (0.996, 1.0, "smooth_l1")
    assert blocks.momentum_schedule == "linear"  # the authors' code: 0.996 -> 1 on a line
    assert (cfg.optimizer.weight_decay, cfg.optimizer.weight_decay_end) == (0.04, 0.4)
    assert cfg.data.torchvision.crop_scale == (0.3, 1.0)
    assert load_config(CONFIGS / "ijepa_imagefolder_vit_s16.yaml").optimizer.num_epochs == 300
    recorder = Shapes()
    state = SSLTrainer(cfg, hooks=[*default_hooks(cfg), recorder]).train()
    assert state.iteration == 1
    assert torch.isfinite(state.loss)
    (target, context, teacher) = recorder.shapes
    assert target[:2] == (2, 4) and context[0] == 2 and context[1] >= 10
    assert teacher == (2, 196, 384)  # the target encoder's tokens of the 14x14 grid


@pytest.mark.parametrize("recipe", ["ijepa_digits_vit_tiny", "ijepa_imagefolder_vit_s16"])
def test_the_recipes_are_listed_by_name(recipe: str) -> None:
    assert recipe in recipe_paths()

"""ViT backbones on torchvision's ``VisionTransformer``: tokens, training, resume, export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer

from hookbus import Hook, SSLTrainer, default_hooks, load_config
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.hook_set import method_hooks
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.presets import VIT_PRESETS
from hookbus.parts.models.pretrained import load_backbone_weights
from hookbus.parts.models.vit import ViTBackbone
from tests.conftest import tiny_config
from tests.runner.test_recipes import CONFIGS, METHOD_HOOKS, ViewSizes, small_folder

# Sizes for the 8x8 tiny test images: 2x2 patches, a 4x4 grid.
TINY_VIT = {"patch_size": 2, "width": 16, "depth": 2, "heads": 2, "mlp_dim": 32}
TINY_MODEL = {
    "backbone": {"name": "vit_tiny", "in_channels": 1, "vit": TINY_VIT},
    "head": {"dims": [16, 16, 8]},
}


def build(name: str, **fields: Any) -> nn.Module:
    return BACKBONES.get(name)(BackboneConfig(name=name, **fields))


def test_vit_tiny_gives_the_class_token_and_the_patch_tokens() -> None:
    net = build("vit_tiny", in_channels=1, image_size=16)
    assert isinstance(net, VisionTransformer)
    assert net.out_dim == 64
    assert net.conv_proj.in_channels == 1
    images = torch.randn(3, 1, 16, 16)
    cls, patches = net.tokens(images)
    assert cls.shape == (3, 64)
    assert patches.shape == (3, 16, 64)  # (16 / 4) ** 2 patches
    torch.testing.assert_close(net(images), cls)
    # A multi-crop small view: 12 px, a 3x3 grid with the position embedding resized.
    cls, patches = net.tokens(torch.randn(2, 1, 12, 12))
    assert (cls.shape, patches.shape) == ((2, 64), (2, 9, 64))


def test_vit_sizes_come_from_the_preset_unless_the_config_sets_them() -> None:
    net = build("vit_tiny", in_channels=3, image_size=8, vit=TINY_VIT)
    assert net.out_dim == 16
    assert (net.patch_size, net.hidden_dim, net.mlp_dim) == (2, 16, 32)
    assert len(net.encoder.layers) == 2
    assert net.encoder.layers[0].self_attention.num_heads == 2
    assert net.encoder.pos_embedding.shape == (1, 1 + 16, 16)
    assert net(torch.randn(2, 3, 8, 8)).shape == (2, 16)
    assert VIT_PRESETS["vit_s16"].width == 384 and VIT_PRESETS["vit_b16"].width == 768


def test_vit_presets_have_the_published_sizes() -> None:
    for name, width, heads, mlp in (("vit_s16", 384, 6, 1536), ("vit_b16", 768, 12, 3072)):
        net = build(name, in_channels=3)
        assert net.out_dim == width
        assert (net.image_size, net.patch_size, net.mlp_dim) == (224, 16, mlp)
        assert len(net.encoder.layers) == 12
        assert net.encoder.layers[0].self_attention.num_heads == heads


def test_bad_vit_sizes_are_config_errors() -> None:
    with pytest.raises(ValidationError, match="heads \\(3\\) must divide the width \\(16\\)"):
        BackboneConfig(name="vit_tiny", vit={"width": 16, "heads": 3})
    with pytest.raises(ValidationError, match="less than or equal to 256"):
        BackboneConfig(name="vit_tiny", vit={"patch_size": 1000})
    with pytest.raises(ValueError, match="not a multiple of the patch size 4"):
        build("vit_tiny", image_size=18)
    cfg = validate_config({"model": {"backbone": {"name": "vit_tiny"}, "head": {"dims": [32, 8]}}})
    with pytest.raises(ValueError, match="set model.head.dims\\[0\\] to 64"):
        build_model(cfg)


def test_the_image_size_comes_from_data_image_size() -> None:
    cfg = validate_config(
        {
            "data": {"image_size": 24},
            "model": {"backbone": {"name": "vit_tiny"}, "head": {"dims": [64, 8]}},
        }
    )
    model = build_model(cfg)
    assert model.backbone.image_size == 24
    assert model.backbone.encoder.pos_embedding.shape == (1, 1 + 36, 64)


def test_weights_of_another_image_size_load_with_their_position_grid() -> None:
    trained = build("vit_tiny", in_channels=1, image_size=8, vit=TINY_VIT).eval()
    preset = build("vit_tiny", in_channels=1, vit=TINY_VIT)  # image_size None: 16
    assert preset.encoder.pos_embedding.shape == (1, 1 + 64, 16)
    preset.load_state_dict(trained.state_dict())
    assert preset.image_size == 8 and preset.encoder.pos_embedding.shape == (1, 1 + 16, 16)
    images = torch.randn(2, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(preset.eval()(images), trained(images))


class StopAfterPhase(Hook):
    priority = 200

    def __init__(self, phase_idx: int) -> None:
        super().__init__()
        self.phase_idx = phase_idx

    def on_phase_end(self, engine: Any) -> None:
        if engine.state.phase_idx == self.phase_idx:
            raise RuntimeError("stopped")


def dino_run(run_dir: Path, *extra: Hook, **model: Any) -> Any:
    """Two epochs of DINO with multi-crop (8 px and 6 px views) on the tiny ViT."""
    cfg = tiny_config(
        run_dir,
        model={**TINY_MODEL, "prototypes": {"count": 12, "weight_norm": True}, **model},
        data={"small_views": {"count": 2, "size": 6, "crop_area": [0.3, 0.6]}},
        loss={"name": "dino"},
        optimizer={"name": "adamw", "num_epochs": 2, "warmup_epochs": 0},
    )
    hooks = [*method_hooks(cfg), CheckpointHook(run_dir), *extra]
    return SSLTrainer(cfg, hooks=hooks).train()


def test_the_tiny_vit_trains_dino_with_multi_crop_and_resumes_bit_exactly(
    tmp_path: Path,
) -> None:
    straight = dino_run(tmp_path / "straight")
    assert straight.iteration == 6
    assert torch.isfinite(straight.loss)
    with pytest.raises(RuntimeError, match="stopped"):
        dino_run(tmp_path / "resumed", StopAfterPhase(1))
    resumed = dino_run(tmp_path / "resumed")
    assert resumed.resumed_from is not None
    assert resumed.iteration == 6
    first, second = straight.base_model.state_dict(), resumed.base_model.state_dict()
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key


def test_bf16_autocast_runs_a_vit_step(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        optimizer={"num_epochs": 1},
        model={**TINY_MODEL, "amp": {"enabled": True, "dtype": "bf16"}},
    )
    state = SSLTrainer(cfg, hooks=[]).train()
    assert state.amp_dtype is torch.bfloat16
    assert torch.isfinite(state.loss)


def test_export_of_a_tiny_vit_run_loads_into_torchvision_vision_transformer(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1}, model=TINY_MODEL)
    state = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    out = tmp_path / "vit.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    weights = torch.load(out, weights_only=True)
    torchvision_vit = VisionTransformer(
        image_size=8, patch_size=2, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
    )  # fmt: skip
    torchvision_vit.conv_proj = nn.Conv2d(1, 16, kernel_size=2, stride=2)  # 1-channel images
    torchvision_vit.load_state_dict(weights)  # strict: every key, every shape
    assert weights["heads.head.weight"].shape == (1000, 16)
    assert torch.count_nonzero(weights["heads.head.weight"]) == 0
    trained = state.base_model.backbone.eval()
    torchvision_vit.heads = nn.Identity()
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(torchvision_vit.eval()(images), trained(images))
    # The exported file loads back into the backbone (linear evaluation from it).
    fresh = build("vit_tiny", in_channels=1, image_size=8, vit=TINY_VIT)
    load_backbone_weights(fresh, out)
    with torch.no_grad():
        torch.testing.assert_close(fresh.eval()(images), trained(images))


def test_linear_evaluation_of_a_vit_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1}, model=TINY_MODEL)
    pretrained = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train().base_model.backbone
    linear = tiny_config(
        tmp_path / "linear",
        optimizer={"num_epochs": 1},
        model={
            **TINY_MODEL,
            "linear_eval": {
                "enabled": True,
                "num_classes": 4,
                "checkpoint": str(run / "checkpoint.torch"),
            },
        },
        loss={"name": "cross_entropy"},
        data={"num_views": 1},
    )
    state = SSLTrainer(linear, hooks=[]).train()
    assert torch.isfinite(state.loss)
    # The frozen backbone still holds the pretrained weights.
    for key, value in pretrained.state_dict().items():
        assert torch.equal(state.base_model.backbone.state_dict()[key], value), key


def test_vit_s16_runs_forward_and_backward() -> None:
    # The real ViT-S/16 sizes at 64 px (a 4x4 grid) to keep the suite fast on CPUs; the
    # recipe test below runs it at 224 px.
    net = build("vit_s16", in_channels=3, image_size=64)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    images = torch.randn(2, 3, 64, 64)
    for _ in range(2):
        optimizer.zero_grad()
        cls, patches = net.tokens(images)
        assert cls.shape == (2, 384) and patches.shape == (2, 16, 384)
        (cls.square().mean() + patches.mean()).backward()
        assert net.conv_proj.weight.grad is not None
        optimizer.step()


def test_the_vit_s16_recipe_trains_a_step_on_generated_224_px_images(tmp_path: Path) -> None:
    images = small_folder(tmp_path, per_class=1)
    cfg = load_config(
        CONFIGS / "dino_imagefolder_vit_s16.yaml",
        [
            f"data.folder.train_dir={images}",
            "data.folder.test_dir=null",
            "data.batch_size=2",
            "data.small_views.count=2",
            "data.num_workers=0",
            "data.pin_memory=false",
            # A smaller head and fewer prototypes for speed; the backbone is the real ViT-S/16.
            "model.head.dims=[384,256,256,64]",
            "model.prototypes.count=256",
            "model.amp.enabled=false",  # bf16 on CPU is slow; test_bf16_autocast_runs_a_vit_step
            "optimizer.num_epochs=1",
            "trainer.test_model=false",
            f"checkpoint.dir={tmp_path / 'run'}",
        ],
    )
    assert cfg.model.backbone.name == "vit_s16" and cfg.data.image_size == 224
    assert cfg.optimizer.lr == pytest.approx(0.0005 * 512 / 256)
    hooks = [hook for hook in default_hooks(cfg) if hook.name in METHOD_HOOKS["dino"]]
    recorder = ViewSizes()
    state = SSLTrainer(cfg, hooks=[*hooks, recorder]).train()
    assert state.iteration == 1
    assert recorder.sizes == [[224, 224, 96, 96]]
    assert bool(state.loss.isfinite())


def test_the_digits_vit_recipe_builds() -> None:
    cfg = load_config(CONFIGS / "dino_digits_vit_tiny.yaml")
    assert METHOD_HOOKS["dino"] <= {hook.name for hook in default_hooks(cfg)}
    model = build_model(cfg)
    assert isinstance(model.backbone, ViTBackbone)
    assert model.backbone.out_dim == 64
    assert model.encode(torch.randn(2, 1, 16, 16)).shape == (2, 64)

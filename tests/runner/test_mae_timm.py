"""MAE on timm's Vision Transformers: the visible tokens are those of timm's own forward
when every patch is kept, a run trains from a weights file with a fresh decoder and exports
an encoder timm loads, and a timm model that is no VisionTransformer is refused at
validation in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from safetensors.torch import save_file

from hookbus import SSLTrainer, default_hooks, load_config
from hookbus.cli import main
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.mae import MaskedAutoencoder
from hookbus.parts.models.timm_any import TimmViTTokens
from tests.photos import make_photo_folder

timm = pytest.importorskip("timm")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = {"depth": 2, "embed_dim": 32, "num_heads": 2, "img_size": 48}
"""timm's architectures at a test's size: two blocks, a 3x3 grid of 16-pixel patches."""


def small_timm(**options: Any) -> Any:
    """timm's ``vit_small_patch16_224`` at :data:`SMALL` sizes, float64, eval mode."""
    torch.manual_seed(0)
    net = timm.create_model("vit_small_patch16_224", num_classes=0, **SMALL, **options)
    return net.double().eval()


@pytest.mark.parametrize(
    "options", [{}, {"reg_tokens": 2}, {"class_token": False, "global_pool": "avg"}]
)
def test_every_patch_kept_gives_timms_forward_features(options: dict) -> None:
    net = small_timm(dynamic_img_size=True, **options)
    images = torch.randn(2, 3, 48, 48, dtype=torch.float64)
    keep = torch.arange(9).expand(2, -1)
    with torch.no_grad():
        tokens = TimmViTTokens(net).visible_tokens(images, keep)
        expected = net.forward_features(images)
    patches = expected[:, net.num_prefix_tokens :]
    first = expected[:, 0] if net.cls_token is not None else patches.mean(dim=1)
    assert tokens.shape == (2, 10, 32)
    torch.testing.assert_close(tokens[:, 1:], patches, rtol=0, atol=0)
    torch.testing.assert_close(tokens[:, 0], first, rtol=0, atol=1e-15)  # a mean: rounding


def test_kept_patches_are_encoded_without_the_others() -> None:
    net = small_timm(dynamic_img_size=True)
    images = torch.randn(2, 3, 48, 48, dtype=torch.float64)
    keep = torch.tensor([[4, 0], [8, 7]])
    with torch.no_grad():
        tokens = TimmViTTokens(net).visible_tokens(images, keep)
        position = net._pos_embed(net.patch_embed(images))
        chosen = torch.stack([position[i, 1 + keep[i]] for i in range(2)])
        alone = net.norm(net.blocks(torch.cat([position[:, :1], chosen], dim=1)))
    torch.testing.assert_close(tokens, alone, rtol=0, atol=0)


def mae_run(tmp_path: Path, *overrides: str) -> Any:
    """The MAE photo recipe on timm's ViT-Ti/16 at 64 px (4x4 patches, 4 kept), two steps
    of 4 crops of scikit-learn's photographs."""
    raw = yaml.safe_load((CONFIGS / "mae_imagefolder_vit_b16.yaml").read_text())
    raw["model"]["backbone"] = {"name": "timm:vit_tiny_patch16_224", "in_channels": 3}
    raw["model"]["mae_decoder"] = {"width": 32, "depth": 1, "heads": 2}
    raw["model"]["amp"] = {"enabled": False}
    source = tmp_path / "mae_timm.yaml"
    source.write_text(yaml.safe_dump(raw))
    photos = make_photo_folder(tmp_path / "photos", per_class=2, size=72)
    return load_config(
        source,
        [
            f"data.folder.train_dir={photos / 'train'}",
            "data.folder.test_dir=null",
            "data.image_size=64",
            "data.batch_size=4",
            "data.num_workers=0",
            "data.pin_memory=false",
            "meters.knn.enabled=false",
            "optimizer.num_epochs=2",
            "optimizer.warmup_epochs=1",
            "trainer.test_model=false",
            "hooks.tensorboard.enabled=false",
            "hooks.summary_plot.enabled=false",
            f"checkpoint.dir={tmp_path / 'run'}",
            *overrides,
        ],
    )


@pytest.mark.slow
def test_mae_trains_timms_vit_from_a_safetensors_file(tmp_path: Path) -> None:
    torch.manual_seed(7)
    name = "timm:vit_tiny_patch16_224"
    net = BACKBONES.get(name)(BackboneConfig(name=name, in_channels=3, image_size=64))
    state = {key: value.contiguous() for key, value in net.state_dict().items()}
    save_file(state, tmp_path / "vit_ti16.safetensors")
    cfg = mae_run(tmp_path, f"model.backbone.weights={tmp_path / 'vit_ti16.safetensors'}")
    model = build_model(cfg)
    assert isinstance(model, MaskedAutoencoder)
    assert all(torch.equal(model.backbone.state_dict()[k], v) for k, v in state.items())

    trainer = SSLTrainer(cfg, hooks=[h for h in default_hooks(cfg) if h.name != "progress_bar"])
    final = trainer.train()
    assert final.iteration == 2 and bool(final.loss.isfinite())
    output = final.last_output
    assert output["reconstruction"].shape == output["target_patches"].shape == (4, 16, 768)
    assert output["mask"].sum(dim=1).tolist() == [12.0] * 4  # 4 of 16 patches kept
    trained = final.base_model.backbone.state_dict()
    assert not torch.equal(trained["blocks.0.attn.qkv.weight"], state["blocks.0.attn.qkv.weight"])

    out = tmp_path / "encoder.pth"  # the encoder, without the decoder, loads into timm
    assert main(["export", str(tmp_path / "run" / "checkpoint.torch"), str(out)]) == 0
    reference = timm.create_model(
        "vit_tiny_patch16_224", img_size=64, checkpoint_path=str(out)
    )  # strict
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = reference.eval().forward_features(images)[:, 0]
        torch.testing.assert_close(final.base_model.eval().encode(images), expected)


def test_a_timm_model_that_is_no_vision_transformer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        mae_run(tmp_path, "model.backbone.name=timm:vit_small_patch16_dinov3")
    message = str(error.value)
    assert "is a Eva, not timm's VisionTransformer" in message
    assert "must be vit_tiny, vit_s16, vit_b16 or timm's VisionTransformer" in message
    assert "\n" not in message

"""The options that bring the recipes to their authors' settings: a GELU head, a ViT
without a class token, and the recipes that set them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from hookbus import load_config
from hookbus.parts.models import build_model
from hookbus.parts.models.heads import MLPHead
from hookbus.parts.models.presets import ViTSizes
from hookbus.parts.models.vit import ViTBackbone

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SIZES = ViTSizes(image_size=8, patch_size=4, width=16, depth=2, heads=2, mlp_dim=32)


def test_a_gelu_head_has_gelu_after_each_hidden_layer_and_none_after_the_last() -> None:
    kinds = [type(layer) for layer in MLPHead([8, 6, 5, 4], False, activation="gelu").layers]
    assert kinds == [nn.Linear, nn.GELU, nn.Linear, nn.GELU, nn.Linear]


def test_a_gelu_head_computes_the_exact_gelu_of_its_hidden_layer() -> None:
    torch.manual_seed(0)
    head = MLPHead([3, 5, 2], batch_norm=False, activation="gelu").double()
    x = torch.randn(4, 3, dtype=torch.float64)
    first, last = head.layers[0], head.layers[2]
    hidden = first(x)
    expected = last(0.5 * hidden * (1 + torch.erf(hidden / 2**0.5)))
    torch.testing.assert_close(head(x), expected, rtol=0, atol=1e-15)


def test_an_unknown_activation_is_refused() -> None:
    with pytest.raises(ValueError, match="relu or gelu"):
        MLPHead([4, 4, 4], False, activation="tanh")  # type: ignore[arg-type]


def test_a_vit_without_class_token_has_none_and_gives_the_mean_patch_token() -> None:
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1, class_token=False, position_embedding="sincos")
    assert vit.class_token is None and "class_token" not in vit.state_dict()
    images = torch.randn(3, 1, 8, 8)
    cls, patches = vit.tokens(images)
    assert patches.shape == (3, 4, 16)
    torch.testing.assert_close(cls, patches.mean(dim=1), rtol=0, atol=0)
    torch.testing.assert_close(vit(images), cls, rtol=0, atol=0)
    every = torch.arange(4).expand(3, -1)
    visible = vit.visible_tokens(images, every)
    torch.testing.assert_close(visible[:, 1:], patches, rtol=1e-6, atol=1e-6)


def test_a_vit_without_class_token_encodes_the_patches_alone() -> None:
    # One block that mixes tokens: the patch tokens alone, with their position rows.
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1, class_token=False).eval()
    images = torch.randn(2, 1, 8, 8)
    x = vit.conv_proj(images).flatten(2).transpose(1, 2)
    x = x + vit.encoder.pos_embedding[:, 1:]
    expected = vit.encoder.ln(vit.encoder.layers(x))
    torch.testing.assert_close(vit.tokens(images)[1], expected, rtol=0, atol=0)


def test_a_vit_without_class_token_takes_registers_in_front_of_the_patches() -> None:
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1, class_token=False, registers=2)
    assert vit.prefix_tokens == 2
    assert vit.tokens(torch.randn(2, 1, 8, 8))[1].shape == (2, 4, 16)


def test_with_a_class_token_the_tokens_are_unchanged_by_the_option() -> None:
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1, registers=1)
    images = torch.randn(2, 1, 8, 8)
    x = vit.conv_proj(images).flatten(2).transpose(1, 2)
    x = torch.cat([vit.class_token.expand(2, -1, -1), x], dim=1) + vit.encoder.pos_embedding
    x = torch.cat([x[:, :1], vit.register_tokens.expand(2, -1, -1), x[:, 1:]], dim=1)
    x = vit.encoder.ln(vit.encoder.layers(x))
    cls, patches = vit.tokens(images)
    assert torch.equal(cls, x[:, 0]) and torch.equal(patches, x[:, 2:])


@pytest.mark.parametrize(
    "recipe",
    [
        "dino_imagefolder_resnet50",
        "dino_imagefolder_vit_s16",
        "dinov2_imagefolder_vit_s16",
        "ibot_imagefolder_vit_s16",
    ],
)
def test_the_dino_family_image_folder_recipes_have_the_authors_gelu_head(recipe: str) -> None:
    assert load_config(CONFIGS / f"{recipe}.yaml").model.head.activation == "gelu"


def test_the_ijepa_image_folder_recipe_has_the_authors_vit_and_block_placement() -> None:
    cfg = load_config(CONFIGS / "ijepa_imagefolder_vit_s16.yaml")
    vit = cfg.model.backbone.vit
    assert (vit.position_embedding, vit.class_token) == ("sincos", False)
    assert cfg.loss.ijepa.block_placement == "authors"


def test_the_ijepa_image_folder_recipe_builds_a_vit_without_class_token() -> None:
    cfg = load_config(CONFIGS / "ijepa_imagefolder_vit_s16.yaml", ["model.ijepa_predictor.depth=1"])
    backbone = build_model(cfg).backbone
    assert backbone.class_token is None
    assert not backbone.encoder.pos_embedding.requires_grad


def test_the_ibot_image_folder_recipe_has_the_authors_vit_s16_settings() -> None:
    cfg = load_config(CONFIGS / "ibot_imagefolder_vit_s16.yaml")
    loss, optimizer, data = cfg.loss, cfg.optimizer, cfg.data
    assert (cfg.model.prototypes.count, cfg.model.prototypes.weight_norm) == (8192, False)
    assert (loss.ibot.mask_probability, loss.ibot.mask_ratio) == (0.5, (0.1, 0.5))
    assert (loss.dino.teacher_temperature, loss.dino.warmup_teacher_epochs) == (0.07, 30)
    assert (loss.dino.momentum, loss.ibot.patch_center_momentum) == (0.996, 0.9)
    assert (optimizer.lr, optimizer.num_epochs, optimizer.clip_grad_norm) == (0.002, 800, 3.0)
    assert (data.small_views.count, data.small_views.crop_area) == (10, (0.05, 0.25))
    assert data.torchvision.crop_scale == (0.25, 1.0)
    assert cfg.model.backbone.vit.drop_path == 0.1

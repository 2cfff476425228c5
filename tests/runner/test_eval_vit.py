"""What ``hookbus eval`` reads from a ViT: the concatenated class tokens of the last
blocks, the class token's attention maps and the patch PCA colours, on hookbus's ViT and
on timm's, checked against direct computations."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from hookbus import load_config
from hookbus.eval_features import BACKBONE, encode_batch, vit_parts
from hookbus.parts.models import build_model
from hookbus.pictures_vit import class_attention, patch_pca_colours, vit_pictures

IMAGES = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def model_of(backbone: str, **model: object) -> nn.Module:
    """A SimCLR model on ``backbone`` for 32 px RGB images, seeded, in eval mode."""
    cfg = load_config(
        None,
        [
            f"model.backbone.name={backbone}",
            "model.backbone.in_channels=3",
            "model.backbone.image_size=32",
            "data.image_size=32",
            "model.head.dims=[backbone,16,8]",
            *(f"model.backbone.vit.{key}={value}" for key, value in model.items()),
        ],
    )
    torch.manual_seed(0)
    return build_model(cfg).eval()


@pytest.fixture(scope="module")
def hookbus_vit() -> nn.Module:
    return model_of("vit_tiny", registers=2)


@pytest.fixture(scope="module")
def timm_vit() -> nn.Module:
    return model_of("timm:vit_tiny_patch16_224")


def block_inputs(backbone: nn.Module, images: torch.Tensor) -> list[torch.Tensor]:
    """The tokens entering each block of hookbus's ViT, then the last block's output,
    computed step by step as the ViT's own forward does."""
    x = backbone.conv_proj(images).flatten(2).transpose(1, 2)
    x = torch.cat([backbone.class_token.expand(len(x), -1, -1), x], dim=1)
    x = backbone._with_registers(x + backbone.position_embedding(8, 8))
    seen = [x]
    for layer in backbone.encoder.layers:
        seen.append(layer(seen[-1]))
    return seen


def test_last_blocks_are_the_normed_class_tokens_of_each_block_concatenated(
    hookbus_vit: nn.Module,
) -> None:
    backbone = hookbus_vit.backbone
    parts = vit_parts(hookbus_vit)
    with torch.no_grad():
        found = encode_batch(hookbus_vit, IMAGES, parts, 3)
        outputs = block_inputs(backbone, IMAGES)[1:]
        expected = torch.cat([backbone.encoder.ln(out)[:, 0] for out in outputs[-3:]], dim=1)
        features = hookbus_vit.encode(IMAGES)
    assert found["last3"].shape == (3, 3 * 64)
    torch.testing.assert_close(found["last3"], expected)
    torch.testing.assert_close(found[BACKBONE], features)
    torch.testing.assert_close(found["last3"][:, -64:], features)  # the last block's is encode's


def test_timm_last_blocks_equal_timms_own_intermediate_layers(timm_vit: nn.Module) -> None:
    backbone = timm_vit.backbone
    with torch.no_grad():
        found = encode_batch(timm_vit, IMAGES, vit_parts(timm_vit), 4)
        layers = backbone.get_intermediate_layers(IMAGES, n=4, return_prefix_tokens=True, norm=True)
    expected = torch.cat([prefix[:, 0] for _, prefix in layers], dim=1)
    torch.testing.assert_close(found["last4"], expected)
    torch.testing.assert_close(found[BACKBONE], timm_vit.encode(IMAGES))


def test_a_small_cnn_has_no_last_blocks() -> None:
    assert vit_parts(model_of("small_cnn")) is None


def test_attention_maps_are_the_last_blocks_class_row_over_the_patches(
    hookbus_vit: nn.Module,
) -> None:
    backbone = hookbus_vit.backbone
    maps = class_attention(hookbus_vit, vit_parts(hookbus_vit), IMAGES)
    assert maps.shape == (3, 4, 64)  # 4 heads, 8 x 8 patches (the 2 registers left out)
    torch.testing.assert_close(maps.sum(dim=-1), torch.ones(3, 4, dtype=torch.float64))
    with torch.no_grad():
        entering = block_inputs(backbone, IMAGES)[-2]
        last = backbone.encoder.layers[-1]
        normed = last.ln_1(entering)
        _, weights = last.self_attention(
            normed, normed, normed, need_weights=True, average_attn_weights=False
        )
    row = weights[:, :, 0, 3:].double()
    torch.testing.assert_close(maps, row / row.sum(dim=-1, keepdim=True))
    assert not torch.allclose(maps[:, 0], maps[:, 1])  # each head its own map


def test_timm_attention_maps_equal_timms_unfused_attention(timm_vit: nn.Module) -> None:
    attention = timm_vit.backbone.blocks[-1].attn
    seen: list[torch.Tensor] = []
    handle = attention.attn_drop.register_forward_hook(lambda m, i, o: seen.append(o))
    attention.fused_attn = False
    try:
        with torch.no_grad():
            timm_vit.backbone(IMAGES)
    finally:
        attention.fused_attn = True
        handle.remove()
    maps = class_attention(timm_vit, vit_parts(timm_vit), IMAGES)
    row = seen[0][:, :, 0, 1:].double()
    assert maps.shape == (3, 3, 4)  # timm's tiny ViT: 3 heads, 2 x 2 patches of 16 px
    torch.testing.assert_close(maps, row / row.sum(dim=-1, keepdim=True))


def test_patch_pca_colours_are_the_first_three_components_scaled(hookbus_vit: nn.Module) -> None:
    with torch.no_grad():
        tokens = hookbus_vit.backbone.tokens(IMAGES)[1]
    colours = patch_pca_colours(tokens, (8, 8))
    assert colours.shape == (3, 8, 8, 3)
    assert colours.min() == 0 and colours.max() == 1
    flat = tokens.reshape(-1, 64).double().numpy()
    centred = flat - flat.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred)
    top = vectors[:, np.argsort(values)[::-1][:3]]
    projected = centred @ top
    scaled = (projected - projected.min(axis=0)) / np.ptp(projected, axis=0)
    found = colours.reshape(-1, 3).numpy()
    for channel in range(3):  # a component's sign is a convention: either way round
        flipped = 1 - scaled[:, channel]
        assert (
            min(
                np.abs(found[:, channel] - scaled[:, channel]).max(),
                np.abs(found[:, channel] - flipped).max(),
            )
            < 1e-6
        )


def test_vit_pictures_draw_both_figures(hookbus_vit: nn.Module) -> None:
    drawn = vit_pictures(hookbus_vit, IMAGES, lambda images: images.sigmoid())
    assert drawn is not None
    assert drawn.attention.shape == (3, 4, 8, 8)
    assert torch.isfinite(drawn.attention).all() and torch.isfinite(drawn.colours).all()
    for picture in (drawn.attention_png, drawn.pca_png):
        assert picture.startswith(b"\x89PNG")
    assert vit_pictures(model_of("small_cnn"), IMAGES, torch.sigmoid) is None


def test_a_backbone_that_is_not_timms_is_told_apart_without_importing_timm(
    monkeypatch: pytest.MonkeyPatch, timm_vit: nn.Module
) -> None:
    imported: list[str] = []
    real_import = builtins.__import__

    def recording(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", recording)
    assert vit_parts(model_of("small_cnn")) is None
    assert vit_parts(timm_vit) is not None  # timm's ViT, its module loaded by building it
    assert not [name for name in imported if name.startswith("timm")]

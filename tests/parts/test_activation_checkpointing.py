"""Activation checkpointing of ViT blocks: the same gradients, names and options."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus import load_config
from hookbus.engine.errors import ConfigError
from hookbus.parts.activation_checkpointing import checkpoint_vit_blocks
from hookbus.parts.models import build_model
from hookbus.parts.models.build import check_backbone_options

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TINY_VIT = ("model.backbone.vit.width=16", "model.backbone.vit.heads=2")
TINY_VIT += ("model.backbone.vit.mlp_dim=32", "model.backbone.vit.depth=3")
TINY_VIT += ("model.head.dims=[backbone,32,64]",)
DROP_PATH = "model.backbone.vit.drop_path"


def _model_and_gradients(*overrides: str, checkpointed: bool) -> tuple[torch.nn.Module, dict]:
    cfg = load_config(CONFIGS / "dino_digits_vit_tiny.yaml", [*TINY_VIT, *overrides])
    torch.manual_seed(0)
    model = build_model(cfg).train()
    if checkpointed:
        assert checkpoint_vit_blocks(model) == 3
    views = [torch.randn(4, 1, 16, 16, generator=torch.Generator().manual_seed(1))]
    torch.manual_seed(2)
    output = model({"views": views})
    (output["embeddings"][0] ** 2).sum().backward()
    return model, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("drop_path", [f"{DROP_PATH}=0.0", f"{DROP_PATH}=0.5"])
def test_checkpointed_blocks_give_the_gradients_of_plain_blocks(drop_path: str) -> None:
    _, plain = _model_and_gradients(drop_path, checkpointed=False)
    _, checkpointed = _model_and_gradients(drop_path, checkpointed=True)
    assert plain.keys() == checkpointed.keys()
    assert any(".encoder_layer_2." in name for name in plain)
    for name, grad in plain.items():
        assert torch.allclose(checkpointed[name], grad, rtol=0, atol=1e-6), name


def test_checkpointed_blocks_keep_the_parameter_names() -> None:
    plain, _ = _model_and_gradients(checkpointed=False)
    checkpointed, _ = _model_and_gradients(checkpointed=True)
    assert list(checkpointed.state_dict()) == list(plain.state_dict())


def test_activation_checkpointing_is_refused_for_a_cnn_backbone() -> None:
    cfg = load_config(
        CONFIGS / "simclr_digits.yaml", ["model.backbone.vit.activation_checkpointing=true"]
    )
    with pytest.raises(ConfigError, match="^model.backbone.vit.activation_checkpointing: "):
        check_backbone_options(cfg)


def test_a_checkpointed_block_runs_its_forward_again_in_backward() -> None:
    cfg = load_config(CONFIGS / "dino_digits_vit_tiny.yaml", list(TINY_VIT))
    runs = []
    model = build_model(cfg).train()
    checkpoint_vit_blocks(model)
    mlp = model.backbone.encoder.layers[0].mlp[0]
    mlp.register_forward_hook(lambda *args: runs.append(torch.is_grad_enabled()))
    output = model({"views": [torch.randn(2, 1, 16, 16)]})
    assert len(runs) == 1
    output["embeddings"][0].sum().backward()
    assert len(runs) == 2

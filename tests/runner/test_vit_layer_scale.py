"""LayerScale and the uniform drop path rule of the ViT backbones, from the config: the
blocks they build, the keys of a checkpoint, training, resume and export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.drop_path import DropPathBlock
from hookbus.parts.models.fine_tune import vit_depths
from hookbus.parts.models.layer_scale import LayerScaleBlock
from hookbus.parts.models.vit import ViTBackbone, torchvision_vit
from hookbus.parts.optim import build_optimizer
from tests.conftest import tiny_config

TINY_VIT = {"patch_size": 2, "width": 16, "depth": 3, "heads": 2, "mlp_dim": 32}


def tiny(**vit: Any) -> ViTBackbone:
    torch.manual_seed(0)
    cfg = BackboneConfig(name="vit_tiny", in_channels=1, image_size=8, vit={**TINY_VIT, **vit})
    return BACKBONES.get("vit_tiny")(cfg)


def scale_keys(depth: int) -> set[str]:
    return {
        f"encoder.layers.encoder_layer_{block}.layer_scale_{branch}"
        for block in range(depth)
        for branch in (1, 2)
    }


def test_without_the_options_the_backbone_has_torchvisions_blocks_and_keys() -> None:
    plain = tiny()
    assert [type(block).__name__ for block in plain.encoder.layers] == ["EncoderBlock"] * 3
    theirs = set(torchvision_vit(plain.sizes, in_channels=1).state_dict())
    assert set(plain.state_dict()) == {key for key in theirs if not key.startswith("heads.")}


def test_layer_scale_adds_two_scales_per_block_at_their_init_and_keeps_the_rest() -> None:
    plain, scaled = tiny(), tiny(layer_scale=1e-5)
    assert [type(block) for block in scaled.encoder.layers] == [LayerScaleBlock] * 3
    assert [block.rate for block in scaled.encoder.layers] == [0.0] * 3  # no drop path
    ours, theirs = scaled.state_dict(), plain.state_dict()
    assert set(ours) - set(theirs) == scale_keys(3)
    assert all(torch.equal(ours[key], theirs[key]) for key in theirs)
    for key in scale_keys(3):
        assert torch.equal(ours[key], torch.full((16,), 1e-5))
    # The scales sit in their block's depth for layer decay.
    depths = vit_depths(scaled)
    assert depths["encoder.layers.encoder_layer_2.layer_scale_2"] == 3


def vit_config(**vit: Any) -> Any:
    backbone = {"name": "vit_tiny", "in_channels": 1, "vit": {**TINY_VIT, **vit}}
    return validate_config(
        {
            "data": {"image_size": 8},
            "model": {"backbone": backbone, "head": {"dims": [16, 16, 8]}},
            "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.1},
        }
    )


def test_the_scales_are_learned_without_weight_decay() -> None:
    cfg = vit_config(layer_scale=1e-5)
    torch.manual_seed(0)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    scales = [p for name, p in model.named_parameters() if "layer_scale" in name]
    assert len(scales) == 6
    decay = {
        id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]
    }
    assert [decay[id(scale)] for scale in scales] == [0.0] * 6
    views = [torch.randn(4, 1, 8, 8) for _ in range(2)]
    torch.cat(model({"views": views})["embeddings"]).square().mean().backward()
    optimizer.step()
    for scale in scales:
        assert torch.count_nonzero(scale.detach() - 1e-5) == 16  # every channel moved


@pytest.mark.parametrize(
    ("vit", "rates"),
    [
        ({"drop_path": 0.2}, [0.0, 0.1, 0.2]),
        ({"drop_path": 0.2, "drop_path_rule": "linear"}, [0.0, 0.1, 0.2]),
        ({"drop_path": 0.2, "drop_path_rule": "uniform"}, [0.2, 0.2, 0.2]),
        ({"drop_path": 0.2, "drop_path_rule": "uniform", "layer_scale": 1e-6}, [0.2] * 3),
    ],
)
def test_the_drop_path_rule_sets_each_blocks_rate(vit: dict, rates: list[float]) -> None:
    net = build_model(vit_config(**vit)).backbone
    assert [block.rate for block in net.encoder.layers] == pytest.approx(rates)
    assert all(isinstance(block, DropPathBlock) for block in net.encoder.layers)
    plain = tiny().state_dict()
    ours = {key: value for key, value in tiny(**vit).state_dict().items() if key in plain}
    assert ours.keys() == plain.keys()
    assert all(torch.equal(ours[key], plain[key]) for key in plain)


@pytest.mark.parametrize(
    ("vit", "message"),
    [
        ({"drop_path_rule": "uniform"}, "drop_path_rule uniform spreads drop_path over the"),
        ({"drop_path": 0.1, "drop_path_rule": "cubic"}, "model.backbone.vit.drop_path_rule"),
        ({"layer_scale": 0.0}, "model.backbone.vit.layer_scale"),
        ({"layer_scale": 2.0}, "model.backbone.vit.layer_scale"),
    ],
)
def test_settings_the_backbone_cannot_honour_are_refused(vit: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config({"model": {"backbone": {"name": "vit_tiny", "vit": vit}}}, "test")


def test_layer_scale_is_an_option_of_the_vit_backbones_only() -> None:
    from hookbus.parts.models.build import check_backbone_options

    with pytest.raises(ConfigError, match="model.backbone.vit.layer_scale"):
        check_backbone_options(
            validate_config({"model": {"backbone": {"vit": {"layer_scale": 1e-5}}}})
        )


TINY_MODEL = {
    "backbone": {"name": "vit_tiny", "in_channels": 1, "vit": {**TINY_VIT, "layer_scale": 0.1}},
    "head": {"dims": [16, 16, 8]},
}


def test_an_export_folds_the_scales_into_torchvisions_layers(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1}, model=TINY_MODEL)
    state = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    trained = state.base_model.backbone.eval()
    assert not torch.equal(trained.encoder.layers[0].layer_scale_1.detach(), torch.full((16,), 0.1))
    out = tmp_path / "vit.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    assert "folded the LayerScale of its ViT (model.backbone.vit.layer_scale, 6 scales)" in (
        capsys.readouterr().out
    )
    weights = torch.load(out, weights_only=True)
    assert not [key for key in weights if "layer_scale" in key]
    theirs = torchvision_vit(trained.sizes, in_channels=1)
    theirs.load_state_dict(weights)  # strict: torchvision's keys and shapes
    theirs.heads = nn.Identity()
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(theirs.eval()(images), trained(images))


def test_a_run_with_layer_scale_and_uniform_drop_path_resumes_bit_exactly(tmp_path: Path) -> None:
    from tests.runner.test_vit_options import straight_and_resumed_mae_runs

    straight, resumed = straight_and_resumed_mae_runs(
        tmp_path, drop_path=0.3, drop_path_rule="uniform", layer_scale=0.1
    )
    first, second = straight.base_model.state_dict(), resumed.base_model.state_dict()
    assert first.keys() == second.keys() and len([k for k in first if "layer_scale" in k]) == 4
    assert all(torch.equal(first[key], second[key]) for key in first)

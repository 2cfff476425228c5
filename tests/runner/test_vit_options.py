"""The ViT options of MoCo v3 and MAE: the fixed 2-D sine-cosine position embedding and
the Xavier-uniform patch embedding, against their formulas."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torchvision.models.vision_transformer import VisionTransformer

from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.build import zero_classifier_weights
from hookbus.parts.models.drop_path import DropPathBlock
from hookbus.parts.models.vit import ViTBackbone, torchvision_vit
from hookbus.parts.optim import build_optimizer

# 8x8 images in 2x2 patches: a 4x4 grid; width 16, so a quarter of it is 4 frequencies.
TINY_VIT = {"patch_size": 2, "width": 16, "depth": 1, "heads": 2, "mlp_dim": 16}


def tiny(**vit: Any) -> ViTBackbone:
    torch.manual_seed(0)
    cfg = BackboneConfig(name="vit_tiny", in_channels=3, image_size=8, vit={**TINY_VIT, **vit})
    return BACKBONES.get("vit_tiny")(cfg)


def test_the_sincos_table_is_sin_and_cos_of_the_row_then_the_column() -> None:
    table = tiny(position_embedding="sincos").encoder.pos_embedding.detach()
    assert table.shape == (1, 1 + 16, 16)
    assert torch.count_nonzero(table[0, 0]) == 0  # the class token's row
    for row in range(4):
        for col in range(4):
            entry = table[0, 1 + row * 4 + col]
            for k in range(4):
                frequency = 10000 ** (-k / 4)
                expected = [
                    math.sin(row * frequency),
                    math.cos(row * frequency),
                    math.sin(col * frequency),
                    math.cos(col * frequency),
                ]
                got = [float(entry[quarter * 4 + k]) for quarter in range(4)]
                assert got == pytest.approx(expected, abs=1e-6)


def tiny_config(**vit: Any) -> Any:
    return validate_config(
        {
            "data": {"image_size": 8},
            "model": {
                "backbone": {"name": "vit_tiny", "in_channels": 1, "vit": {**TINY_VIT, **vit}},
                "head": {"dims": [16, 16, 8]},
            },
            "optimizer": {"weight_decay": 0.1},
        }
    )


def a_training_step(cfg: Any) -> tuple[torch.nn.Module, torch.Tensor, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    before = model.backbone.encoder.pos_embedding.detach().clone()
    views = [torch.randn(4, 1, 8, 8) for _ in range(2)]
    torch.cat(model({"views": views})["embeddings"]).square().mean().backward()
    optimizer.step()
    return model, before, optimizer


def test_the_sincos_table_stays_fixed_through_a_step_and_a_learned_one_moves() -> None:
    model, before, optimizer = a_training_step(tiny_config(position_embedding="sincos"))
    position = model.backbone.encoder.pos_embedding
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not position.requires_grad and id(position) not in optimized
    assert position.grad is None
    assert torch.equal(position, before)
    learned, start, _ = a_training_step(tiny_config())
    assert learned.backbone.encoder.pos_embedding.requires_grad
    assert not torch.equal(learned.backbone.encoder.pos_embedding, start)


def test_a_sincos_backbone_loads_into_torchvision_and_back_frozen() -> None:
    net = tiny(position_embedding="sincos").eval()
    weights = net.state_dict()
    assert "encoder.pos_embedding" in weights  # a parameter under torchvision's key
    backbone_cfg = BackboneConfig(name="vit_tiny")
    weights |= zero_classifier_weights(backbone_cfg, weights, num_classes=10)
    theirs = torchvision_vit(net.sizes, num_classes=10)
    theirs.load_state_dict(weights)  # strict
    assert isinstance(theirs, VisionTransformer)
    images = torch.randn(2, 3, 8, 8)
    theirs.heads = torch.nn.Identity()
    with torch.no_grad():
        torch.testing.assert_close(theirs.eval()(images), net(images))
    # Loaded into a fresh sincos backbone (a resume), the table stays frozen, even when it
    # comes with another grid.
    again = tiny(position_embedding="sincos")
    again.load_state_dict(net.state_dict())
    assert not again.encoder.pos_embedding.requires_grad
    wider = {**TINY_VIT, "position_embedding": "sincos"}
    other_grid = BACKBONES.get("vit_tiny")(
        BackboneConfig(name="vit_tiny", in_channels=3, image_size=16, vit=wider)
    )
    other_grid.load_state_dict(net.state_dict())
    assert other_grid.encoder.pos_embedding.shape == (1, 17, 16)
    assert not other_grid.encoder.pos_embedding.requires_grad


def test_the_xavier_uniform_patch_embedding_fills_its_range() -> None:
    # 3 channels of 2x2 patches into 64: fan in 12, fan out 64.
    net = tiny(width=64, patch_embedding_init="xavier_uniform", heads=4)
    weight = net.conv_proj.weight.detach()
    bound = math.sqrt(6 / (3 * 2 * 2 + 64))
    assert float(weight.abs().max()) <= bound
    assert float(weight.abs().max()) > 0.95 * bound
    assert float(weight.var()) == pytest.approx(bound**2 / 3, rel=0.15)
    assert torch.count_nonzero(net.conv_proj.bias) == 0
    # torchvision's truncated normal over the fan-in has another spread.
    default = tiny(width=64, heads=4).conv_proj.weight.detach()
    assert float(default.var()) > 1.5 * bound**2 / 3


def test_the_options_come_from_the_config_and_bad_ones_are_refused() -> None:
    net = build_model(
        tiny_config(position_embedding="sincos", patch_embedding_init="xavier_uniform")
    ).backbone
    assert not net.encoder.pos_embedding.requires_grad
    assert torch.count_nonzero(net.conv_proj.bias) == 0
    narrow = {"width": 6, "heads": 2, "position_embedding": "sincos"}
    with pytest.raises(ConfigError, match=r"model\.backbone\.vit.*divisible by 4"):
        validate_config({"model": {"backbone": {"name": "vit_tiny", "vit": narrow}}}, "test")
    with pytest.raises(ConfigError, match=r"model\.backbone\.vit\.patch_embedding_init"):
        validate_config({"model": {"backbone": {"vit": {"patch_embedding_init": "he"}}}}, "test")


def test_drop_path_keeps_the_weights_and_keys_and_rises_to_its_rate() -> None:
    plain, dropping = tiny(depth=3), tiny(depth=3, drop_path=0.2)
    assert [type(block) for block in dropping.encoder.layers] == [DropPathBlock] * 3
    assert [block.rate for block in dropping.encoder.layers] == pytest.approx([0.0, 0.1, 0.2])
    theirs, ours = plain.state_dict(), dropping.state_dict()
    assert theirs.keys() == ours.keys()
    assert all(torch.equal(theirs[key], ours[key]) for key in theirs)


def branches(block: DropPathBlock, tokens: torch.Tensor, keep: tuple[float, float]) -> torch.Tensor:
    """The block by hand with its attention and MLP branches scaled by ``keep``."""
    x = block.ln_1(tokens)
    x = block.self_attention(x, x, x, need_weights=False)[0] * keep[0] + tokens
    return x + block.mlp(block.ln_2(x)) * keep[1]


def test_drop_path_drops_each_samples_branches_in_training_only() -> None:
    torch.manual_seed(1)
    block = DropPathBlock(2, 16, 16, rate=0.5)
    tokens = torch.randn(64, 5, 16)
    with torch.no_grad():
        plain = branches(block, tokens, (1.0, 1.0))
        torch.testing.assert_close(block.eval()(tokens), plain)
        torch.testing.assert_close(block.train()(tokens), plain)  # no gradients: no drop
    out = block.train()(tokens).detach()
    seen = set()
    with torch.no_grad():
        for sample in range(64):
            for keep in ((0.0, 0.0), (0.0, 2.0), (2.0, 0.0), (2.0, 2.0)):
                expected = branches(block, tokens[sample : sample + 1], keep)[0]
                if torch.allclose(out[sample], expected, atol=1e-5):
                    seen.add(keep)
                    break
            else:
                pytest.fail(f"sample {sample}: neither branch kept at 1 / (1 - rate) nor dropped")
    assert len(seen) == 4  # every combination of kept and dropped branches occurs


def test_drop_path_comes_from_the_config_and_is_bounded() -> None:
    net = build_model(tiny_config(drop_path=0.3)).backbone
    assert [block.rate for block in net.encoder.layers] == [0.0]  # one block: rate 0 ... 0.3
    deeper = build_model(tiny_config(drop_path=0.3, depth=2)).backbone
    assert [block.rate for block in deeper.encoder.layers] == pytest.approx([0.0, 0.3])
    with pytest.raises(ConfigError, match=r"model\.backbone\.vit\.drop_path"):
        validate_config({"model": {"backbone": {"vit": {"drop_path": 1.0}}}}, "test")


def straight_and_resumed_mae_runs(tmp_path: Path, **vit_options: Any) -> tuple[Any, Any]:
    """The final states of a tiny MAE run with ``vit_options`` on its ViT, straight and
    stopped after its first phase then resumed; asserts the second resumed to the same
    iteration."""
    from hookbus import SSLTrainer
    from hookbus.hooks.checkpoint import CheckpointHook
    from tests.runner.test_loss_mae import TINY_MAE, mae_config
    from tests.runner.test_vit_backbone import StopAfterPhase

    vit = {**TINY_MAE["model"]["backbone"]["vit"], **vit_options}
    backbone = {**TINY_MAE["model"]["backbone"], "vit": vit}

    def run(folder: Path, *extra: Any) -> Any:
        cfg = mae_config(folder, model={"backbone": backbone})
        return SSLTrainer(cfg, hooks=[CheckpointHook(folder / "run"), *extra]).train()

    straight = run(tmp_path / "straight")
    with pytest.raises(RuntimeError, match="stopped"):
        run(tmp_path / "resumed", StopAfterPhase(1))
    resumed = run(tmp_path / "resumed")
    assert resumed.resumed_from is not None and resumed.iteration == straight.iteration
    return straight, resumed


def test_an_mae_run_with_drop_path_resumes_bit_exactly(tmp_path: Path) -> None:
    straight, resumed = straight_and_resumed_mae_runs(tmp_path, drop_path=0.3)
    first, second = straight.base_model.state_dict(), resumed.base_model.state_dict()
    assert all(torch.equal(first[key], second[key]) for key in first)

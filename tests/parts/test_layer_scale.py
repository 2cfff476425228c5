"""LayerScale blocks and the drop path rules: the scales' init and forward, their folding
into torchvision's keys, and the rate of each block under each rule."""

from __future__ import annotations

import pytest
import torch
from torchvision.models.vision_transformer import EncoderBlock

from hookbus.parts.models.drop_path import DropPathBlock, drop_path_rates
from hookbus.parts.models.layer_scale import LayerScaleBlock, fold_layer_scale


def blocks(init: float) -> tuple[DropPathBlock, LayerScaleBlock]:
    """A plain block and a LayerScale block with the same weights (2 heads, width 16)."""
    torch.manual_seed(0)
    plain = DropPathBlock(2, 16, 32, rate=0.0)
    scaled = LayerScaleBlock(2, 16, 32, rate=0.0, init=init)
    scaled.load_state_dict({**scaled.state_dict(), **plain.state_dict()})
    return plain, scaled


def by_hand(block: EncoderBlock, tokens: torch.Tensor, g1: torch.Tensor, g2: torch.Tensor):
    """``x + g1 * attention(x)``, then ``x + g2 * mlp(x)``, with the block's layers."""
    x = block.ln_1(tokens)
    x = g1 * block.self_attention(x, x, x, need_weights=False)[0] + tokens
    return x + g2 * block.mlp(block.ln_2(x))


def test_the_scales_start_at_init_one_per_channel_and_are_learned() -> None:
    _, scaled = blocks(1e-5)
    for scale in (scaled.layer_scale_1, scaled.layer_scale_2):
        assert scale.shape == (16,) and scale.requires_grad
        assert torch.equal(scale.detach(), torch.full((16,), 1e-5))
    tokens = torch.randn(4, 5, 16)
    scaled(tokens).square().sum().backward()
    assert torch.count_nonzero(scaled.layer_scale_1.grad) == 16
    assert torch.count_nonzero(scaled.layer_scale_2.grad) == 16


def test_each_branch_is_scaled_channel_by_channel() -> None:
    plain, scaled = blocks(1.0)
    tokens = torch.randn(4, 5, 16)
    with torch.no_grad():
        assert torch.equal(scaled.eval()(tokens), plain.eval()(tokens))  # scale 1: the same
        scaled.layer_scale_1.copy_(torch.linspace(-1, 1, 16))
        scaled.layer_scale_2.copy_(torch.linspace(0.5, 2, 16))
        expected = by_hand(plain, tokens, scaled.layer_scale_1, scaled.layer_scale_2)
        torch.testing.assert_close(scaled(tokens), expected)
    # A small init keeps the block close to the identity.
    _, small = blocks(1e-5)
    with torch.no_grad():
        assert float((small.eval()(tokens) - tokens).abs().max()) < 1e-3


def test_folding_gives_torchvisions_keys_and_the_same_outputs() -> None:
    _, scaled = blocks(1.0)
    with torch.no_grad():
        scaled.layer_scale_1.copy_(torch.linspace(-1, 1, 16))
        scaled.layer_scale_2.copy_(torch.linspace(0.5, 2, 16))
    weights = {f"layers.0.{key}": value for key, value in scaled.state_dict().items()}
    assert fold_layer_scale(weights) == 2
    folded = {key.removeprefix("layers.0."): value for key, value in weights.items()}
    torchvision_block = EncoderBlock(2, 16, 32, dropout=0.0, attention_dropout=0.0)
    assert folded.keys() == torchvision_block.state_dict().keys()
    torchvision_block.load_state_dict(folded)  # strict
    tokens = torch.randn(4, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(torchvision_block.eval()(tokens), scaled.eval()(tokens))


def test_weights_without_scales_are_left_as_they_are() -> None:
    plain, _ = blocks(1.0)
    weights = plain.state_dict()
    assert fold_layer_scale(weights) == 0
    assert all(torch.equal(weights[key], value) for key, value in plain.state_dict().items())


def test_the_init_must_be_above_zero() -> None:
    with pytest.raises(ValueError, match="LayerScale init must be above 0, got 0.0"):
        LayerScaleBlock(2, 16, 32, rate=0.0, init=0.0)


def test_the_linear_rule_rises_to_the_rate_and_the_uniform_rule_keeps_it() -> None:
    assert drop_path_rates(0.3, 4, "linear") == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert drop_path_rates(0.3, 4) == drop_path_rates(0.3, 4, "linear")  # the default
    assert drop_path_rates(0.3, 1, "linear") == [0.0]
    assert drop_path_rates(0.3, 4, "uniform") == [0.3, 0.3, 0.3, 0.3]
    with pytest.raises(ValueError, match="linear or uniform, got 'cosine'"):
        drop_path_rates(0.3, 4, "cosine")  # type: ignore[arg-type]

"""RoPE on hookbus's ViT: DINOv3's coordinates, periods and jitter written out, the
rotated attention against torchvision's, and the backbone's keys and refusals."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hookbus.config import validate_config
from hookbus.parts.models.presets import ViTSizes
from hookbus.parts.models.rope import RopeAttention, rope_periods, rope_sin_cos, use_rope
from hookbus.parts.models.vit import ViTBackbone

SIZES = ViTSizes(image_size=8, patch_size=4, width=16, depth=2, heads=2, mlp_dim=32)


def test_the_periods_are_the_authors_powers_of_the_base() -> None:
    expected = [100 ** (2 * k / 4) for k in range(2)]  # head width 8: 2 per axis
    assert rope_periods(8, 100.0).tolist() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="divisible by 4"):
        rope_periods(6, 100.0)


def test_sin_and_cos_follow_the_authors_coordinates_and_angles() -> None:
    rows, cols, periods = 2, 3, rope_periods(8, 100.0)
    sin, cos = rope_sin_cos(rows, cols, periods)
    assert sin.shape == cos.shape == (6, 8)
    for i in range(rows):
        for j in range(cols):
            y = 2 * (i + 0.5) / rows - 1
            x = 2 * (j + 0.5) / cols - 1
            half = [2 * math.pi * y / p for p in periods.tolist()]
            half += [2 * math.pi * x / p for p in periods.tolist()]
            angles = torch.tensor(half + half)
            torch.testing.assert_close(sin[i * cols + j], angles.sin(), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(cos[i * cols + j], angles.cos(), rtol=1e-5, atol=1e-6)


def test_jitter_and_rescale_scale_the_coordinates_by_draws_of_the_global_generator() -> None:
    periods = rope_periods(8, 100.0)
    torch.manual_seed(3)
    sin, _ = rope_sin_cos(2, 2, periods, jitter=2.0, rescale=1.5)
    torch.manual_seed(3)
    per_axis = torch.empty(2).uniform_(-math.log(2.0), math.log(2.0)).exp()
    both = torch.empty(1).uniform_(-math.log(1.5), math.log(1.5)).exp()
    coords = torch.tensor([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]])
    coords = coords * per_axis * both
    angles = (2 * math.pi * coords[:, :, None] / periods).flatten(1).tile(2)
    torch.testing.assert_close(sin, angles.sin())
    assert not torch.equal(sin, rope_sin_cos(2, 2, periods)[0])


def test_without_rotation_the_attention_is_torchvisions() -> None:
    torch.manual_seed(0)
    plain = nn.MultiheadAttention(16, 2, batch_first=True)
    rope = RopeAttention(16, 2, batch_first=True)
    rope.load_state_dict(plain.state_dict())
    rope.rope = (torch.zeros(3, 8), torch.ones(3, 8))
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(rope(x, x, x)[0], plain(x, x, x, need_weights=False)[0])


def test_the_patch_tokens_queries_and_keys_are_rotated_the_prefix_ones_not() -> None:
    torch.manual_seed(0)
    attention = RopeAttention(8, 1, batch_first=True).double()
    sin, cos = (part.double() for part in rope_sin_cos(1, 2, rope_periods(8, 100.0)))
    attention.rope = (sin, cos)
    x = torch.randn(1, 3, 8, dtype=torch.float64)  # a class token and 2 patches
    q, k, v = (
        x @ w.T + b
        for w, b in zip(
            attention.in_proj_weight.chunk(3), attention.in_proj_bias.chunk(3), strict=True
        )
    )

    def rotate(t: torch.Tensor) -> torch.Tensor:
        rows = [t[0, 0]]
        for p in range(2):
            first, second = t[0, 1 + p, :4], t[0, 1 + p, 4:]
            rows.append(t[0, 1 + p] * cos[p] + torch.cat([-second, first]) * sin[p])
        return torch.stack(rows)

    scores = torch.softmax(rotate(q) @ rotate(k).T / math.sqrt(8), dim=-1)
    expected = attention.out_proj(scores @ v[0])
    torch.testing.assert_close(attention(x, x, x)[0][0], expected, rtol=1e-12, atol=1e-12)


def test_use_rope_keeps_the_weights_and_the_draws_after_it() -> None:
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1)
    before = vit.encoder.layers.state_dict()
    torch.manual_seed(5)
    use_rope(vit.encoder.layers)
    after_draw = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(after_draw, torch.rand(1))
    after = vit.encoder.layers.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[key], before[key]) for key in before)


def test_a_rope_vit_has_no_position_embedding_and_torchvisions_other_keys() -> None:
    torch.manual_seed(0)
    learned = ViTBackbone(SIZES, in_channels=1, registers=1)
    torch.manual_seed(0)
    rope = ViTBackbone(SIZES, in_channels=1, registers=1, position_embedding="rope")
    assert rope.encoder.pos_embedding is None
    assert set(learned.state_dict()) - set(rope.state_dict()) == {"encoder.pos_embedding"}
    assert set(rope.state_dict()) <= set(learned.state_dict())


def test_a_rope_vit_encodes_grids_of_any_size_and_jitters_only_in_training() -> None:
    torch.manual_seed(0)
    vit = ViTBackbone(SIZES, in_channels=1, position_embedding="rope", rope_jitter=2.0)
    images = torch.randn(2, 1, 8, 8)
    assert vit.tokens(torch.randn(2, 1, 12, 12))[1].shape == (2, 9, 16)
    vit.eval()
    assert torch.equal(vit(images), vit(images))
    vit.train()
    torch.manual_seed(1)
    first = vit(images)
    torch.manual_seed(1)
    assert torch.equal(first, vit(images))  # the jitter comes from the global generator
    assert not torch.equal(first, vit(images))


def test_a_rope_vit_refuses_to_encode_part_of_its_grid() -> None:
    vit = ViTBackbone(SIZES, in_channels=1, position_embedding="rope")
    with pytest.raises(ValueError, match="whole grids only"):
        vit.visible_tokens(torch.randn(1, 1, 8, 8), torch.tensor([[0, 1]]))


def test_the_config_refuses_jitter_without_rope_and_rope_with_activation_checkpointing() -> None:
    with pytest.raises(Exception, match="rope_jitter jitters RoPE"):
        validate_config({"model": {"backbone": {"vit": {"rope_jitter": 2.0}}}})
    with pytest.raises(Exception, match="activation_checkpointing is not supported"):
        validate_config(
            {
                "model": {
                    "backbone": {
                        "vit": {"position_embedding": "rope", "activation_checkpointing": True}
                    }
                }
            }
        )

"""Rotary position embeddings (RoPE) for hookbus's ViT, with DINOv3's 2-D coordinates,
periods and coordinate jitter (Siméoni et al., "DINOv3", 2025; Heo et al., "Rotary
Position Embedding for Vision Transformer", 2024)."""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def rope_periods(head_dim: int, base: float) -> Tensor:
    """The periods ``base ** (2 k / (head_dim / 2))``, ``k = 0 .. head_dim / 4 - 1``
    (float32), one per pair of rotated channels of each axis."""
    if head_dim % 4:
        raise ValueError(f"RoPE needs a head width divisible by 4, got {head_dim}")
    quarter = head_dim // 4
    return base ** (2 * torch.arange(quarter, dtype=torch.float32) / (head_dim // 2))


def rope_sin_cos(
    rows: int,
    cols: int,
    periods: Tensor,
    *,
    jitter: float | None = None,
    rescale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``sin`` and ``cos`` ``[rows * cols, head_dim]`` of the patch grid (patches row by
    row). A patch's coordinates are its centre's, ``(i + 0.5) / rows`` and
    ``(j + 0.5) / cols``, mapped to ``[-1, 1]``; in training, ``jitter`` multiplies each
    axis by its own ``exp(u)``, ``u`` uniform in ``[-log jitter, log jitter]``, and
    ``rescale`` both by one such factor, drawn from torch's global generator in that
    order (the authors' ``jitter_coords`` and ``rescale_coords``; None: none). The angle
    of coordinate ``c`` at period ``p`` is ``2 pi c / p``: the row's angles, then the
    column's, the whole repeated twice along the channels."""
    coords_h = torch.arange(0.5, rows, dtype=torch.float32) / rows
    coords_w = torch.arange(0.5, cols, dtype=torch.float32) / cols
    coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1)
    coords = 2.0 * coords.flatten(0, 1) - 1.0
    if jitter is not None:
        coords = coords * torch.empty(2).uniform_(-math.log(jitter), math.log(jitter)).exp()
    if rescale is not None:
        coords = coords * torch.empty(1).uniform_(-math.log(rescale), math.log(rescale)).exp()
    angles = 2 * math.pi * coords[:, :, None] / periods[None, None, :]
    angles = angles.flatten(1, 2).tile(2)
    return torch.sin(angles), torch.cos(angles)


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` along the last dimension."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class RopeAttention(nn.MultiheadAttention):
    """torchvision's self-attention (``nn.MultiheadAttention``, batch first, the same
    parameters and keys) with RoPE on the queries and keys of the patch tokens.

    The backbone sets :attr:`rope` (``sin``, ``cos`` ``[P, head_dim]`` for the ``P``
    patch tokens, which come last in the sequence) before it runs its blocks; the
    tokens before them (class token, registers) are not rotated. The rotation runs in
    float32 (float64 stays float64), as the authors', and the result goes back to the
    input's dtype.
    """

    rope: tuple[Tensor, Tensor] | None = None

    def forward(  # type: ignore[override]
        self, query: Tensor, key: Tensor, value: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, None]:
        """Self-attention of ``query`` ``[B, N, width]`` (key and value are the same)."""
        if self.rope is None:
            raise RuntimeError("RopeAttention: the backbone sets rope before its blocks run")
        batch, tokens, width = query.shape
        qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
        qkv = qkv.view(batch, tokens, 3, self.num_heads, width // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each [B, heads, N, head_dim]
        sin, cos = self.rope
        q, k = self._rotate(q, sin, cos), self._rotate(k, sin, cos)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        out = out.transpose(1, 2).reshape(batch, tokens, width)
        return self.out_proj(out), None

    @staticmethod
    def _rotate(x: Tensor, sin: Tensor, cos: Tensor) -> Tensor:
        prefix = x.shape[-2] - len(sin)
        patches = x[..., prefix:, :].to(torch.promote_types(x.dtype, torch.float32))
        rotated = (patches * cos + rotate_half(patches) * sin).to(x.dtype)
        return torch.cat([x[..., :prefix, :], rotated], dim=-2)


def use_rope(layers: nn.Sequential) -> list[RopeAttention]:
    """Replace the self-attention of every block of ``layers`` by a :class:`RopeAttention`
    with its weights; returns them (the backbone sets their ``rope``)."""
    attentions = []
    for block in layers:
        old = cast(nn.MultiheadAttention, block.self_attention)
        with torch.random.fork_rng(devices=[]):  # the weights are old's: leave the draws
            new = RopeAttention(old.embed_dim, old.num_heads, dropout=old.dropout, batch_first=True)
        new.load_state_dict(old.state_dict())
        block.self_attention = new
        attentions.append(new)
    return attentions

"""The narrow transformer over patch tokens that a method puts after its encoder: MAE's
decoder and I-JEPA's predictor (the config side is ``engine.section.TokenTransformerSection``)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torchvision.models.vision_transformer import EncoderBlock


class TokenTransformer(nn.Module):
    """The parts MAE's decoder and I-JEPA's predictor share, under the same names in
    both state dicts: ``embed`` (a linear layer from the encoder's width to ``width``),
    ``mask_token`` (a learned ``[1, 1, width]`` token, zeros until the subclass draws
    it), ``layers`` (``depth`` torchvision ``EncoderBlock`` layers, ``heads`` heads, an
    MLP of ``mlp_dim``, 4 x ``width`` when None, no dropout) and ``ln`` (the final
    LayerNorm). ``grid`` is the patch grid the subclass builds its fixed position
    embedding for.

    The subclass adds its output layer and position buffer and draws the initial
    weights by its paper's rule; the parts here are made first, in this order, so a
    seeded build draws the same numbers as before they were shared.
    """

    def __init__(
        self,
        encoder_width: int,
        grid: tuple[int, int],
        *,
        width: int,
        depth: int,
        heads: int,
        mlp_dim: int | None,
    ) -> None:
        super().__init__()
        self.grid = grid
        self.embed = nn.Linear(encoder_width, width)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, width))
        self.layers = nn.Sequential(
            *[EncoderBlock(heads, width, mlp_dim or 4 * width, 0.0, 0.0) for _ in range(depth)]
        )
        self.ln = nn.LayerNorm(width, eps=1e-6)

    def transform(self, x: Tensor) -> Tensor:
        """The layers and the final LayerNorm over the token sequences ``x``
        ``[B, L, width]``."""
        return self.ln(self.layers(x))

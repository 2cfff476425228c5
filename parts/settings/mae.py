"""The settings of MAE: ``loss.mae`` and ``model.mae_decoder``. Torch-free sections, declared
field by field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section, TokenTransformerSection


class MaeConfig(Section):
    """MAE: reconstruct the pixels of randomly masked patches from the visible ones."""

    mask_ratio: float = Field(
        0.75, gt=0, lt=1, description="fraction of each image's patches masked (not encoded)"
    )
    norm_pix_loss: bool = Field(
        True,
        description="regress each patch's pixels normalised by their own mean and standard "
        "deviation, not the raw pixels",
    )


class MaeDecoderConfig(TokenTransformerSection):
    """MAE's light decoder: transformer blocks from the encoded visible patches and mask
    tokens to the pixels of every patch (built only when ``loss.name`` is ``mae``)."""

    width: int = Field(
        512, ge=4, le=8192, description="token width of the decoder (a multiple of 4 and of heads)"
    )
    depth: int = Field(8, ge=1, le=64, description="transformer blocks of the decoder")
    heads: int = Field(16, ge=1, le=128, description="attention heads of the decoder")
    mlp_dim: int | None = Field(
        None, ge=1, le=32_768, description="hidden size of each block's MLP; None: 4 x width"
    )

"""The settings of I-JEPA: ``loss.ijepa`` and ``model.ijepa_predictor``. Torch-free sections,
declared field by field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hookbus.engine.section import MomentumSchedule, Positive, TokenTransformerSection

Fraction = Annotated[float, Field(gt=0, le=1)]
"""A share of an image's patches, or of a range: above 0, at most 1."""


class IjepaConfig(MomentumSchedule):
    """I-JEPA: predict the target encoder's tokens of target blocks from a context block.
    The target encoder is an EMA of the context encoder (momentum 0.996 to 1)."""

    momentum: float = Field(0.996, ge=0, le=1, description="EMA momentum at the first step")
    distance: Literal["smooth_l1", "l2"] = Field(
        "smooth_l1",
        description="smooth_l1: the authors' code (mean over every value); l2: the paper's "
        "equation (squared distances summed over a block's tokens, averaged over the blocks)",
    )
    target_blocks: int = Field(4, ge=1, le=64, description="target blocks per image (M)")
    target_scale: tuple[Fraction, Fraction] = Field(
        (0.15, 0.2), description="share of the patch grid in a target block, lowest and highest"
    )
    target_aspect_ratio: tuple[Positive, Positive] = Field(
        (0.75, 1.5), description="height / width of a target block, lowest and highest"
    )
    context_scale: tuple[Fraction, Fraction] = Field(
        (0.85, 1.0), description="share of the patch grid in the (square) context block"
    )
    min_context_patches: int = Field(
        10, ge=1, le=1_000_000, description="fewest patches a context keeps outside the targets"
    )
    block_placement: Literal["anywhere", "authors"] = Field(
        "anywhere",
        description="where a block may lie: anywhere it fits, or authors (the authors' "
        "code: a top-left corner drawn from [0, H - h), so no block touches the last row "
        "or column of the patch grid; set in both I-JEPA recipes)",
    )

    @model_validator(mode="after")
    def _ranges_rise(self) -> IjepaConfig:
        for key in ("target_scale", "target_aspect_ratio", "context_scale"):
            low, high = getattr(self, key)
            if low > high:
                raise ValueError(f"{key}: the lowest ({low}) is above the highest ({high})")
        return self


class IjepaPredictorConfig(TokenTransformerSection):
    """I-JEPA's predictor: a narrow ViT from the context tokens and the target blocks'
    positions to the target tokens (built only when ``loss.name`` is ``ijepa``)."""

    width: int = Field(
        384,
        ge=4,
        le=8192,
        description="token width of the predictor (a multiple of 4 and of heads)",
    )
    depth: int = Field(12, ge=1, le=64, description="transformer blocks of the predictor")
    heads: int = Field(12, ge=1, le=128, description="attention heads of the predictor")
    mlp_dim: int | None = Field(
        None, ge=1, le=32_768, description="hidden size of each block's MLP; None: 4 x width"
    )

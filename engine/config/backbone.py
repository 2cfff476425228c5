"""The ``model.backbone`` section: the backbone by name, its weights and its options.

It imports no method entry, so that a method's own section (a frozen teacher's backbone) can
build on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hookbus.engine.config.model_names import canonical_backbone_name
from hookbus.engine.section import MAX_PIXELS, Section


class ViTConfig(Section):
    """Sizes of a Vision Transformer backbone (``vit_*``); None keeps the preset's."""

    patch_size: int | None = Field(
        None, ge=1, le=256, description="side of the square patches, in pixels; None: preset's"
    )
    width: int | None = Field(
        None, ge=1, le=8192, description="token width (hidden size, = out_dim); None: preset's"
    )
    depth: int | None = Field(
        None, ge=1, le=64, description="transformer blocks; None: the preset's"
    )
    heads: int | None = Field(
        None, ge=1, le=128, description="attention heads (divide the width); None: preset's"
    )
    mlp_dim: int | None = Field(
        None, ge=1, le=32_768, description="hidden size of each block's MLP; None: preset's"
    )
    freeze_patch_embedding: bool = Field(
        False,
        description="keep the patch embedding (conv_proj) at its random init: no gradient, "
        "no update (a random patch projection, for stability)",
    )
    position_embedding: Literal["learned", "sincos", "rope"] = Field(
        "learned",
        description="the encoder's position embedding: learned (torchvision's), sincos, "
        "the fixed 2-D sine-cosine table (frozen; kept under "
        "torchvision's key; the width a multiple of 4), or rope, a rotary embedding "
        "of the patch tokens' queries and keys (a head width divisible by 4; no "
        "torchvision export; only for whole grids, not for methods that encode part of it)",
    )
    rope_base: float = Field(
        100.0, gt=1, le=1e6, description="rope: the base of the periods (the authors' 100)"
    )
    rope_jitter: float | None = Field(
        None,
        ge=1,
        le=100,
        description="rope, in training: each axis's coordinates times exp(u), u uniform in "
        "[-log j, log j] (the authors' jitter_coords); None: none",
    )
    rope_rescale: float | None = Field(
        None,
        ge=1,
        le=100,
        description="rope, in training: both axes' coordinates times one such factor "
        "(the authors' rescale_coords, 2 in their ViT-7B configs); None: none",
    )
    patch_embedding_init: Literal["torchvision", "xavier_uniform"] = Field(
        "torchvision",
        description="init of the patch embedding (conv_proj): torchvision's truncated normal, "
        "or xavier_uniform over the kernel as a Linear layer, bias zero",
    )
    class_token_init: Literal["zeros", "normal"] = Field(
        "zeros",
        description="init of the class token: zeros (torchvision's), or normal with std 0.02",
    )
    class_token: bool = Field(
        True,
        description="a class token (torchvision's); false: none, as some ViTs have: the "
        "features are the mean patch token, and no torchvision export",
    )
    drop_path: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="stochastic depth: in training each block's attention and MLP branches "
        "are dropped per sample at a rate rising linearly to this at the last block "
        "(fine-tuning ViT-B: 0.1), or at this rate in every block with drop_path_rule "
        "uniform; never in a forward without gradients (a momentum teacher)",
    )
    drop_path_rule: Literal["linear", "uniform"] = Field(
        "linear",
        description="how drop_path spreads over the blocks: linear, rising from 0 at the "
        "first block to drop_path at the last; uniform, drop_path at every block (needs "
        "drop_path above 0)",
    )
    layer_scale: float | None = Field(
        None,
        gt=0,
        le=1,
        description="LayerScale: each block's attention and MLP branch is multiplied, "
        "channel by channel, by a learned vector starting at this value (1e-5 for ViT-S "
        "and ViT-B, 1e-6 for ViT-L), so every block starts close to the identity; None: "
        "none, torchvision's blocks. Adds two keys per block; an export folds them into "
        "the branches' last linear layers",
    )
    activation_checkpointing: bool = Field(
        False,
        description="each encoder block keeps only its input and recomputes its activations "
        "in backward: less memory, about a third more compute (with DDP or FSDP)",
    )
    registers: int = Field(
        0,
        ge=0,
        le=64,
        description="register tokens (4 in the registers paper): learned tokens beside the "
        "class token, dropped from the outputs; a backbone with them does not export to "
        "torchvision's VisionTransformer",
    )

    @model_validator(mode="after")
    def _a_rule_needs_a_rate(self) -> ViTConfig:
        if self.drop_path_rule != "linear" and not self.drop_path:
            raise ValueError(
                f"drop_path_rule {self.drop_path_rule} spreads drop_path over the blocks, "
                "but drop_path is 0 (no drop path): set drop_path, or remove drop_path_rule"
            )
        return self

    @model_validator(mode="after")
    def _rope_settings_need_rope(self) -> ViTConfig:
        if self.position_embedding != "rope":
            for key in ("rope_jitter", "rope_rescale"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} jitters RoPE: set position_embedding rope")
        elif self.activation_checkpointing:
            raise ValueError(
                "position_embedding rope with activation_checkpointing is not supported: the "
                "blocks' recomputation would not see the rotation of their forward"
            )
        return self

    @model_validator(mode="after")
    def _heads_divide_the_width(self) -> ViTConfig:
        if self.width is not None and self.heads is not None and self.width % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide the width ({self.width})")
        if self.position_embedding == "sincos" and self.width is not None and self.width % 4:
            raise ValueError(
                f"position_embedding sincos needs a width divisible by 4, not {self.width}"
            )
        return self


class BackboneConfig(Section):
    """The backbone, by name, and its options. Each built-in backbone reads some of them
    (its builder says which); one set for a backbone that does not read it is refused
    when the run is validated, naming the key."""

    name: str = Field(
        "small_cnn",
        description="backbone, by its registered name, or tv:NAME (also torchvision/NAME) for "
        "torchvision's classification model NAME, e.g. tv:resnet34 (random init, last Linear "
        "layer removed), or timm:NAME (also timm/NAME) for timm's model NAME, e.g. "
        "timm:vit_small_patch16_224 (random init, no classifier; the timm extra); "
        "timm:NAME.TAG starts from timm's pretrained weights TAG, downloaded through timm's "
        "hub cache (hookbus models lists the names)",
    )

    @field_validator("name", mode="before")
    @classmethod
    def _one_spelling(cls, value: Any) -> Any:
        """``timm/NAME`` is kept as ``timm:NAME``, ``torchvision/NAME`` as ``tv:NAME``."""
        return canonical_backbone_name(value) if isinstance(value, str) else value

    weights: Path | None = Field(
        None,
        description="a file of backbone weights to start from, in every method (the student "
        "and every momentum copy of it): safetensors, a .pth/.pt state dict (read as data, "
        "never code), a hookbus checkpoint or export, or a self-supervised ViT's file as its "
        "authors publish it, for timm's matching model; keys and shapes must fit the backbone",
    )
    width: int = Field(32, ge=1, le=4096, description="channels of the first layer (small_cnn)")
    in_channels: int = Field(1, ge=1, le=64, description="image channels")
    small_stem: bool = Field(
        False,
        description="resnet18, resnet50: a 3x3 stride-1 first convolution and no max-pool, "
        "for small images (an export then needs the same stem in torchvision's model)",
    )
    zero_init_residual: bool = Field(
        False,
        description="resnet18, resnet50: start the last BatchNorm of every residual block at "
        "a zero scale, so each block starts as the identity",
    )
    image_size: int | None = Field(
        None,
        ge=1,
        le=MAX_PIXELS,
        description="image side the backbone is built for (vit_*: the grid of its position "
        "embedding; tv:*: the trial forward that checks the feature size; the others do not "
        "read it); None: data.image_size",
    )
    vit: ViTConfig = Field(
        default_factory=ViTConfig, description="vit_*: sizes that override the preset's"
    )

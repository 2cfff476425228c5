"""MAE: reconstruct the pixels of randomly masked patches from the visible ones."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, crop_only
from hookbus.engine.methods.entries import MethodSpec, ModelSection, Views, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.mae import MaeConfig, MaeDecoderConfig


def check_mae(cfg: Config) -> None:
    """MAE encodes the visible patches with a ViT and has no projection head, predictor or
    prototypes (its one view is checked by the shared rule)."""
    model = cfg.model
    name = model.backbone.name
    if not name.startswith("vit_") and not cfg.from_python.backbone:
        raise ValueError(
            "loss.name mae masks the patches of a Vision Transformer: model.backbone.name "
            f"must be vit_tiny, vit_s16 or vit_b16 (got {name})"
        )
    if model.predictor.dims or model.prototypes.count:
        raise ValueError(
            "loss.name mae has a decoder (model.mae_decoder), no predictor or prototypes: "
            "set model.predictor.dims=[] and model.prototypes.count=0"
        )
    head = model.head.changed_keys()
    if head:
        raise ValueError(
            f"model.head.{head[0]}: loss.name mae has a decoder (model.mae_decoder), no "
            "projection head, so model.head is not used; remove it"
        )


def compose_mae(setting: Setting) -> dict[str, Any]:
    """MAE (hookbus's ViTs only): one view, a random crop and nothing else, 75% of the
    patches masked, a decoder of width 64, 2 blocks and 4 heads (256 wide, 4 blocks, 8
    heads on a machine with CUDA), the pixels' own normalisation off on tiny images (as
    the digits recipe), batches of 64 at most, weight decay 0.05."""
    setting.needs_patch_tokens("mae")
    decoder = {"width": 64, "depth": 2, "heads": 4}
    if not setting.laptop:
        decoder = {"width": 256, "depth": 4, "heads": 8}
    return {
        "data": {
            "num_views": 1,
            "small_views": {"count": 0},
            "batch_size": min(setting.batch_size, 64),
            **crop_only(setting, (0.5, 1.0)),
        },
        "model": {"mae_decoder": decoder},
        "loss": {"mae": {"mask_ratio": 0.75, "norm_pix_loss": setting.image_size > 32}},
        "optimizer": {"weight_decay": 0.05},
    }


MAE = register_method(
    MethodSpec[Config](
        name="mae",
        title="MAE",
        parts=("decoder",),
        views=Views(1, 1, small_views=False, reason="reconstructs one masked view of each image"),
        section=MaeConfig,
        model_section=ModelSection(
            key="mae_decoder",
            part="decoder",
            section=MaeDecoderConfig,
        ),
        check=check_mae,
        model="hookbus.parts.models.mae:build_masked_autoencoder",
        compose=compose_mae,
        order=100,
    )
)

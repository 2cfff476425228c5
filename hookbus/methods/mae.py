"""MAE: reconstruct the pixels of randomly masked patches from the visible ones."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, crop_only
from hookbus.engine.methods.entries import MethodSpec, ModelSection, Views, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.mae import MaeConfig, MaeDecoderConfig

MAE_BACKBONES = (
    "model.backbone.name must be vit_tiny, vit_s16, vit_b16 or timm's VisionTransformer "
    "(timm:<name>, such as timm:vit_small_patch16_224)"
)
"""The backbones MAE trains, as its refusals name them."""


def check_mae(cfg: Config) -> None:
    """MAE encodes the visible patches with a ViT (hookbus's ``vit_*``, timm's
    ``VisionTransformer`` by ``timm:<name>``, or a ViT from Python) and has no projection
    head, predictor or prototypes (its one view is checked by the shared rule)."""
    model = cfg.model
    name = model.backbone.name
    if name.startswith("timm:") and not cfg.from_python.backbone:
        from hookbus.parts.models.timm_any import timm_patch_size

        try:
            timm_patch_size(name.removeprefix("timm:"))
        except ValueError as error:
            raise ValueError(f"loss.name mae: {error}; {MAE_BACKBONES}") from None
    elif not name.startswith("vit_") and not cfg.from_python.backbone:
        raise ValueError(
            f"loss.name mae masks the patches of a Vision Transformer: {MAE_BACKBONES} (got {name})"
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
    """MAE (hookbus's ViTs, or a timm ViT): one view, a random crop and nothing else, 75% of the
    patches masked, a decoder of width 64, 2 blocks and 4 heads (256 wide, 4 blocks, 8
    heads on a machine with CUDA), the pixels' own normalisation off on tiny images (as
    the digits recipe), batches of 64 at most, weight decay 0.05."""
    setting.needs_patch_tokens("mae", timm_vit=True)
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

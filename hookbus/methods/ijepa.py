"""I-JEPA: predict the target encoder's tokens of target blocks from a context block."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, crop_only, ema_momentum
from hookbus.engine.methods.entries import (
    MethodHook,
    MethodSpec,
    ModelSection,
    Views,
    register_method,
)
from hookbus.parts.config import Config
from hookbus.parts.settings.ijepa import IjepaConfig, IjepaPredictorConfig


def check_ijepa(cfg: Config) -> None:
    """I-JEPA encodes its one view (checked by the shared rule) with a ViT named by the
    config (``vit_*`` or ``timm:<name>``; its patch size sizes the collate's masks, so a
    backbone from Python cannot be used), and has a predictor (``model.ijepa_predictor``)
    instead of a projection head, predictor MLP or prototypes."""
    model = cfg.model
    name = model.backbone.name
    if cfg.from_python.backbone or not name.startswith(("vit_", "timm:")):
        got = (
            f"a backbone from Python ({cfg.from_python.backbone})"
            if cfg.from_python.backbone
            else name
        )
        raise ValueError(
            "loss.name ijepa predicts the patch tokens of a Vision Transformer named by the "
            f"config: model.backbone.name must be vit_tiny, vit_s16, vit_b16 or a timm ViT "
            f"(timm:<name>), not {got}"
        )
    if model.predictor.dims or model.prototypes.count:
        raise ValueError(
            "loss.name ijepa has its own predictor (model.ijepa_predictor), no predictor MLP or "
            "prototypes: set model.predictor.dims=[] and model.prototypes.count=0"
        )
    head = model.head.changed_keys()
    if head:
        raise ValueError(
            f"model.head.{head[0]}: loss.name ijepa has no projection head, so model.head is "
            "not used; remove it"
        )


def compose_ijepa(setting: Setting) -> dict[str, Any]:
    """I-JEPA (hookbus's ViTs, or a timm ViT): one view cropped from 30% of the image and
    nothing else, hookbus's ViT cut into an 8 x 8 grid of patches, a predictor 32 wide
    with 2 blocks (192 and 6 with CUDA), 4 target blocks (2 on a grid under 8 x 8, which
    must be 4 x 4 at least), a context of a sixth of the patches at least,
    the target encoder's EMA from 0.99 (0.996 on large data) to 1 on a straight line,
    weight decay 0.04 (the digits recipe's)."""
    setting.needs_patch_tokens("ijepa", timm_vit=True)
    patches = setting.patches
    model: dict[str, Any] = {"ijepa_predictor": {"width": 32, "depth": 2, "heads": 4}}
    if not setting.laptop:
        model["ijepa_predictor"] = {"width": 192, "depth": 6, "heads": 6}
    if setting.patch_tokens:
        patch = max(1, setting.image_size // 8)
        model["backbone"] = {"vit": {"patch_size": patch}}
        patches = (setting.image_size // patch) ** 2
    if patches < 16:
        side = 4 * (setting.patch_size or 1)
        raise ValueError(
            f"method ijepa cuts target blocks and a context from a grid of patches, and "
            f"{setting.image_size} pixels make {patches} patches of model {setting.backbone}: "
            f"give a 4 x 4 grid at least (data.image_size={side})"
        )
    return {
        "data": {"num_views": 1, "small_views": {"count": 0}, **crop_only(setting, (0.3, 1.0))},
        "model": model,
        "loss": {
            "ijepa": {
                "distance": "smooth_l1",
                "momentum": ema_momentum(setting),
                "final_momentum": 1.0,
                "momentum_schedule": "linear",
                "min_context_patches": max(2, patches // 6),
                "target_blocks": 4 if patches >= 64 else 2,
            }
        },
        "optimizer": {"weight_decay": 0.04},
    }


IJEPA = register_method(
    MethodSpec[Config](
        name="ijepa",
        title="I-JEPA",
        parts=("predictor ViT",),
        views=Views(
            1, 1, small_views=False, reason="predicts masked blocks of one view of each image"
        ),
        section=IjepaConfig,
        model_section=ModelSection(
            key="ijepa_predictor",
            part="predictor ViT",
            section=IjepaPredictorConfig,
        ),
        hooks=(
            MethodHook[Config](
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.ijepa.teacher_schedule(),
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="target encoder",
            ),
        ),
        check=check_ijepa,
        model="hookbus.parts.models.ijepa:build_jepa_model",
        compose=compose_ijepa,
        order=110,
    )
)

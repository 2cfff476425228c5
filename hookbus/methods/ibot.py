"""iBOT: DINO's class-token self-distillation plus a masked patch-token loss, with
running centers for both."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, multi_crop
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.methods.dino import dino_head, dino_loss
from hookbus.parts.config import Config
from hookbus.parts.settings.ibot import IbotConfig


def check_vit(cfg: Config) -> None:
    """iBOT, DINOv2 and DINOv3 mask the patches of a Vision Transformer: hookbus's
    (``vit_*``), timm's ``VisionTransformer`` or ``Eva`` (``timm:<name>``, DINOv2's and
    DINOv3's ViTs among them), or a Python backbone."""
    name = cfg.model.backbone.name
    if name.startswith("timm:"):
        from hookbus.parts.models.timm_masked import timm_token_vit_patch_size

        check_view_sizes(cfg, timm_token_vit_patch_size(name.removeprefix("timm:")))
        return
    if not name.startswith("vit_") and not cfg.from_python.backbone:
        raise ValueError(
            f"loss.name {cfg.loss.name} masks the patches of a Vision Transformer: "
            f"model.backbone.name must be vit_tiny, vit_s16, vit_b16 or a timm ViT such as "
            f"timm:vit_small_patch14_reg4_dinov2 (got {name})"
        )


def view_sizes(cfg: Config) -> dict[str, int]:
    """The view sides of the run by the key that sets each: the global views, the small
    views (when there are any) and DINOv3's high-resolution Gram teacher (when set)."""
    sizes = {"data.image_size": cfg.data.image_size}
    if cfg.data.small_views.count:
        sizes["data.small_views.size"] = cfg.data.small_views.size
    gram = getattr(cfg.loss, "dinov3", None)
    if cfg.loss.name == "dinov3" and gram is not None and gram.gram_image_size is not None:
        sizes["loss.dinov3.gram_image_size"] = gram.gram_image_size
    return sizes


def check_view_sizes(cfg: Config, patch: int) -> None:
    """timm's ViTs encode whole patches only: every view side a multiple of ``patch``."""
    for key, size in view_sizes(cfg).items():
        if size % patch:
            below, above = size - size % patch, size - size % patch + patch
            raise ValueError(
                f"{key} {size} is not a multiple of {cfg.model.backbone.name}'s patch size "
                f"{patch}: timm's ViT encodes whole patches only (use {below or above} or "
                f"{above})"
            )


def teacher_params(cfg: Config) -> dict[str, Any]:
    """The momentum teacher of iBOT and DINOv2: ``loss.dino``'s schedule and global views
    (the teacher sees them whole)."""
    dino = cfg.loss.dino
    return {
        **dino.teacher_schedule(),
        "views": dino.global_views,
        "shuffle_seed": cfg.trainer.seed,
    }


def centering_params(cfg: Config, centering: bool) -> dict[str, Any]:
    """``dino_centering`` from ``loss.dino``: the teacher temperature, and a running class
    center when ``centering``."""
    dino = cfg.loss.dino
    return {
        "center_momentum": dino.center_momentum,
        "teacher_temperature": dino.teacher_temperature,
        "warmup_teacher_temperature": dino.warmup_teacher_temperature,
        "warmup_epochs": dino.warmup_teacher_epochs,
        "centering": centering,
    }


def patch_centering_params(cfg: Config) -> dict[str, Any]:
    """``patch_centering`` at ``loss.ibot.patch_center_momentum``."""
    return {"center_momentum": cfg.loss.ibot.patch_center_momentum}


def freeze_params(cfg: Config) -> dict[str, Any]:
    """``freeze_prototypes`` for ``loss.dino.freeze_last_layer_epochs`` (both last layers
    when the patch tokens have a head of their own)."""
    return {"epochs": cfg.loss.dino.freeze_last_layer_epochs}


def compose_masked_distillation(setting: Setting, method: str) -> dict[str, Any]:
    """iBOT and DINOv2 (hookbus's ViTs and timm's): DINO's head, last layer, teacher and small
    views (:func:`~hookbus.methods.dino.compose_dino`), and half of the global views
    masked at 10% to 50% of their patches (the digits recipes')."""
    setting.needs_patch_tokens(method, timm_vit=True)
    return {
        "data": {"small_views": multi_crop(setting, 2 if setting.laptop else 4)},
        "model": dino_head(setting),
        "loss": {
            "dino": dino_loss(setting),
            "ibot": {"mask_probability": 0.5, "mask_ratio": [0.1, 0.5], "loss_weight": 1.0},
        },
    }


def compose_ibot(setting: Setting) -> dict[str, Any]:
    """iBOT: :func:`compose_masked_distillation` with running class and patch centers at
    momentum 0.9."""
    composed = compose_masked_distillation(setting, "ibot")
    composed["loss"]["dino"]["center_momentum"] = 0.9
    composed["loss"]["ibot"]["patch_center_momentum"] = 0.9
    return composed


IBOT = register_method(
    MethodSpec[Config](
        name="ibot",
        title="iBOT",
        parts=("prototypes",),
        section=IbotConfig,
        reads=("dino",),
        exclusive_section=True,
        hooks=(
            MethodHook[Config](
                "momentum_teacher", teacher_params, role="teacher, on the whole global views"
            ),
            MethodHook[Config](
                "dino_centering",
                lambda cfg: centering_params(cfg, True),
                role="class center, temperature",
            ),
            MethodHook[Config]("patch_centering", patch_centering_params, role="patch center"),
            MethodHook[Config]("freeze_prototypes", freeze_params, role="last layers"),
        ),
        check=check_vit,
        model="hookbus.parts.models.masked_distillation:build_masked_distillation",
        compose=compose_ibot,
        order=54,
    )
)

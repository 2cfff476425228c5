"""DINOv3: DINOv2's objective plus Gram anchoring, the Gram matrix of each image's patch
features pulled toward that of a Gram teacher, a snapshot of the momentum teacher
refreshed every so many steps (Siméoni et al., "DINOv3", 2025)."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.methods.dinov2 import DINOV2_HOOKS, check_dinov2, compose_dinov2
from hookbus.parts.config import Config
from hookbus.parts.settings.dinov3 import Dinov3Config


def gram_params(cfg: Config) -> dict[str, Any]:
    """The ``gram_teacher`` hook of ``loss.dinov3`` and ``loss.dino.global_views``."""
    dinov3 = cfg.loss.dinov3
    return {
        "weight": dinov3.gram_weight,
        "start": dinov3.gram_start,
        "every": dinov3.gram_update_every,
        "first_update": dinov3.gram_first_update,
        "max_updates": dinov3.gram_max_updates,
        "global_views": cfg.loss.dino.global_views,
        "image_size": dinov3.gram_image_size,
        "resize": dinov3.gram_resize,
        "adaptation_epoch": dinov3.adaptation_epoch,
        "adaptation_image_size": dinov3.adaptation_gram_image_size,
    }


def adaptation_params(cfg: Config) -> dict[str, Any]:
    """The ``adaptation_phase`` hook of ``loss.dinov3.adaptation_epoch``."""
    return {"epoch": cfg.loss.dinov3.adaptation_epoch}


def adapted_sizes(cfg: Config) -> dict[str, int]:
    """The view sides of the adaptation phase by the key that sets each (the sides it
    leaves as they are under their own keys): what the data pipeline cuts from
    ``loss.dinov3.adaptation_epoch`` on."""
    data, dinov3 = cfg.data, cfg.loss.dinov3
    sizes = {"loss.dinov3.adaptation_image_size": dinov3.adaptation_image_size or data.image_size}
    if data.small_views.count:
        small = dinov3.adaptation_small_size or data.small_views.size
        sizes["loss.dinov3.adaptation_small_size"] = small
    gram = dinov3.adaptation_gram_image_size or dinov3.gram_image_size
    if gram is not None:
        sizes["loss.dinov3.adaptation_gram_image_size"] = gram
    return sizes


def check_dinov3(cfg: Config) -> None:
    """DINOv2's rules, a high-resolution Gram teacher no smaller than the global views,
    and an adaptation phase that fits the run (:func:`check_adaptation`)."""
    check_dinov2(cfg)
    size = cfg.loss.dinov3.gram_image_size
    if size is not None and size < cfg.data.image_size:
        raise ValueError(
            f"loss.dinov3.gram_image_size {size} is below data.image_size "
            f"{cfg.data.image_size}: the high-resolution Gram teacher sees larger views"
        )
    check_adaptation(cfg)


def check_adaptation(cfg: Config) -> None:
    """The adaptation phase starts within the run, changes a size, cuts sizes that are
    whole patches of the ViT, and keeps the Gram teacher no smaller than the global
    views; its sizes without its epoch are refused."""
    dinov3, epochs = cfg.loss.dinov3, cfg.optimizer.num_epochs
    sizes = {
        key: getattr(dinov3, key)
        for key in ("adaptation_image_size", "adaptation_small_size", "adaptation_gram_image_size")
    }
    if dinov3.adaptation_epoch is None:
        given = [key for key, value in sizes.items() if value is not None]
        if given:
            raise ValueError(
                f"loss.dinov3.{given[0]} is set without loss.dinov3.adaptation_epoch, the "
                "epoch the adaptation phase starts: set both, or remove it"
            )
        return
    if dinov3.adaptation_epoch > epochs:
        raise ValueError(
            f"loss.dinov3.adaptation_epoch {dinov3.adaptation_epoch} is after the run's "
            f"last epoch (optimizer.num_epochs {epochs})"
        )
    if all(value is None for value in sizes.values()):
        raise ValueError(
            "loss.dinov3.adaptation_epoch changes no size: set adaptation_image_size, "
            "adaptation_small_size or adaptation_gram_image_size"
        )
    if dinov3.adaptation_small_size is not None and not cfg.data.small_views.count:
        raise ValueError(
            "loss.dinov3.adaptation_small_size is set, but the run has no small views "
            "(data.small_views.count 0)"
        )
    adapted = adapted_sizes(cfg)
    patch = vit_patch_size(cfg)
    for key, side in adapted.items():
        if patch is not None and side % patch:
            below = side - side % patch
            raise ValueError(
                f"{key} {side} is not a multiple of the ViT's patch size {patch}: the "
                f"adaptation phase cuts whole patches (use {below or patch} or {below + patch})"
            )
    global_side = adapted["loss.dinov3.adaptation_image_size"]
    gram = adapted.get("loss.dinov3.adaptation_gram_image_size")
    if gram is not None and gram < global_side:
        raise ValueError(
            f"the Gram teacher's side in the adaptation phase ({gram}: "
            "loss.dinov3.adaptation_gram_image_size, else gram_image_size) is below its "
            f"global views' {global_side}: set adaptation_gram_image_size to {global_side} "
            "or more"
        )


def vit_patch_size(cfg: Config) -> int | None:
    """The patch side of the run's ViT: hookbus's ``vit_*`` (``model.backbone.vit``'s
    or its preset's) or timm's; None for a backbone from Python."""
    if cfg.from_python.backbone:
        return None
    # The models' package imports the config, whose validation runs this check: late.
    from hookbus.parts.models.presets import vit_sizes
    from hookbus.parts.models.timm_masked import timm_token_vit_patch_size

    name = cfg.model.backbone.name
    if name.startswith("timm:"):
        return timm_token_vit_patch_size(name.removeprefix("timm:"))
    return vit_sizes(name, patch_size=cfg.model.backbone.vit.patch_size).patch_size


def compose_dinov3(setting: Setting) -> dict[str, Any]:
    """DINOv3: DINOv2's composition (:func:`~hookbus.methods.dinov2.compose_dinov2`),
    rotary position embeddings on hookbus's ViTs (base 100, the authors'), and Gram
    anchoring placed in the run as the digits recipe places it in its 1,800 steps: the
    Gram teacher taken a third of the way in, refreshed every sixth of the run from half
    way, three refreshes at most (``Setting.steps``, the steps the run is composed for)."""
    composed = compose_dinov2(setting, "dinov3")
    if setting.patch_tokens:
        composed["model"]["backbone"] = {"vit": {"position_embedding": "rope", "rope_base": 100.0}}
    composed["loss"]["dinov3"] = {
        "gram_weight": 1.0,
        "gram_start": setting.steps // 3,
        "gram_update_every": setting.steps // 6,
        "gram_first_update": setting.steps // 2,
        "gram_max_updates": 3,
    }
    return composed


DINOV3 = register_method(
    MethodSpec[Config](
        name="dinov3",
        title="DINOv3",
        parts=("prototypes",),
        section=Dinov3Config,
        reads=("dino", "ibot", "dinov2"),
        exclusive_section=True,
        hooks=(
            *DINOV2_HOOKS,
            MethodHook[Config](
                "gram_teacher",
                gram_params,
                when=lambda cfg: cfg.loss.dinov3.gram_weight > 0,
                role="Gram teacher, a refreshed snapshot of the teacher",
            ),
            MethodHook[Config](
                "adaptation_phase",
                adaptation_params,
                when=lambda cfg: cfg.loss.dinov3.adaptation_epoch is not None,
                role="the adaptation phase's view sizes",
            ),
        ),
        check=check_dinov3,
        model="hookbus.parts.models.masked_distillation:build_masked_distillation",
        compose=compose_dinov3,
        order=53,
    )
)

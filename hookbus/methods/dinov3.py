"""DINOv3: DINOv2's objective plus Gram anchoring, the Gram matrix of each image's patch
features pulled toward that of a Gram teacher, a snapshot of the momentum teacher
refreshed every so many steps (Siméoni et al., "DINOv3", 2025)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.engine.section import Section
from hookbus.methods.dinov2 import centered, check_dinov2
from hookbus.methods.ibot import (
    centering_params,
    freeze_params,
    patch_centering_params,
    teacher_params,
)

if TYPE_CHECKING:
    from hookbus.engine.config import Config


class Dinov3Config(Section):
    """DINOv3's Gram anchoring on top of DINOv2 (``loss.dino``, ``loss.ibot``,
    ``loss.dinov2``): the Gram loss, its Gram teacher and the teacher's refresh schedule,
    in train steps from 0."""

    gram_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="weight of the Gram loss once the Gram teacher is taken; 0: no Gram "
        "anchoring (DINOv2's loss with DINOv3's other settings)",
    )
    gram_start: int = Field(
        0,
        ge=0,
        le=10**9,
        description="the train step at whose start the Gram teacher is copied from the "
        "momentum teacher and the Gram loss begins (the authors' it_load_ema_teacher)",
    )
    gram_update_every: int = Field(
        0,
        ge=0,
        le=10**9,
        description="refresh the Gram teacher from the momentum teacher after every this "
        "many steps (the authors' update_frequency, 10000); 0: never",
    )
    gram_first_update: int = Field(
        0,
        ge=0,
        le=10**9,
        description="no refresh before this many steps are done (the authors' it_first_update)",
    )
    gram_max_updates: int | None = Field(
        None, ge=0, le=10**9, description="at most this many refreshes (the authors' 3); None: any"
    )
    gram_normalize: bool = Field(
        True, description="L2-normalise each patch feature before the Gram matrix (the authors')"
    )
    gram_negatives: Literal["keep", "remove", "remove_teacher"] = Field(
        "keep",
        description="negative similarities: keep (the authors' config), remove from both Gram "
        "matrices (remove_neg), or remove_teacher, the teacher's only "
        "(remove_only_teacher_neg)",
    )
    gram_image_size: int | None = Field(
        None,
        ge=1,
        le=8192,
        description="the high-resolution Gram teacher: its views are the global views resized "
        "(bicubic) to this side, its patch features resized to the student's grid "
        "(gram_resize); None: the global views as they are",
    )
    gram_resize: Literal["bicubic", "bilinear"] = Field(
        "bicubic", description="how the high-resolution Gram teacher's features are resized"
    )


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
    }


def check_dinov3(cfg: Config) -> None:
    """DINOv2's rules, and a high-resolution Gram teacher no smaller than the global views."""
    check_dinov2(cfg)
    size = cfg.loss.dinov3.gram_image_size
    if size is not None and size < cfg.data.image_size:
        raise ValueError(
            f"loss.dinov3.gram_image_size {size} is below data.image_size "
            f"{cfg.data.image_size}: the high-resolution Gram teacher sees larger views"
        )


DINOV3 = register_method(
    MethodSpec(
        name="dinov3",
        title="DINOv3",
        parts=("prototypes",),
        section=Dinov3Config,
        reads=("dino", "ibot", "dinov2"),
        exclusive_section=True,
        hooks=(
            MethodHook(
                "momentum_teacher", teacher_params, role="teacher, on the whole global views"
            ),
            MethodHook(
                "dino_centering",
                lambda cfg: centering_params(cfg, centered(cfg)),
                role="teacher temperature; a class center with centering",
            ),
            MethodHook(
                "patch_centering",
                patch_centering_params,
                when=centered,
                role="with loss.dinov2.centering centering",
            ),
            MethodHook("freeze_prototypes", freeze_params, role="last layers"),
            MethodHook(
                "gram_teacher",
                gram_params,
                when=lambda cfg: cfg.loss.dinov3.gram_weight > 0,
                role="Gram teacher, a refreshed snapshot of the teacher",
            ),
        ),
        check=check_dinov3,
        model="hookbus.parts.models.masked_distillation:build_masked_distillation",
        order=53,
    )
)

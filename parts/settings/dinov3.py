"""The settings of DINOv3: ``loss.dinov3``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hookbus.engine.section import Section


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
    adaptation_epoch: int | None = Field(
        None,
        ge=1,
        le=10**6,
        description="the high-resolution adaptation phase: from this epoch (counted from 1) "
        "the views take the adaptation sizes below; None: no adaptation phase",
    )
    adaptation_image_size: int | None = Field(
        None, ge=1, le=8192, description="the global views' side in the adaptation phase"
    )
    adaptation_small_size: int | None = Field(
        None, ge=1, le=8192, description="the small views' side in the adaptation phase"
    )
    adaptation_gram_image_size: int | None = Field(
        None,
        ge=1,
        le=8192,
        description="the high-resolution Gram teacher's side in the adaptation phase "
        "(None: gram_image_size)",
    )

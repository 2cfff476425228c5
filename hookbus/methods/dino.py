"""DINO: self-distillation from a momentum teacher, with centering and sharpening."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.methods import MethodHook, MethodSpec, register_method
from hookbus.engine.section import MomentumSchedule


class DinoConfig(MomentumSchedule):
    """DINO: self-distillation with a momentum teacher, centering and sharpening."""

    student_temperature: float = Field(
        0.1, ge=1e-3, le=100, description="student softmax temperature"
    )
    teacher_temperature: float = Field(
        0.04, ge=1e-3, le=100, description="teacher temperature after warm-up"
    )
    warmup_teacher_temperature: float = Field(
        0.04, ge=1e-3, le=100, description="teacher temperature at the first epoch"
    )
    warmup_teacher_epochs: int = Field(
        0, ge=0, le=100_000, description="epochs of linear teacher-temperature warm-up"
    )
    center_momentum: float = Field(0.9, ge=0, lt=1, description="EMA momentum of the center")
    global_views: int = Field(
        2, ge=1, le=64, description="the first N views go through the teacher"
    )
    freeze_last_layer_epochs: int = Field(
        1, ge=0, le=100_000, description="the last layer (prototypes) gets no update for N epochs"
    )


DINO = register_method(
    MethodSpec(
        name="dino",
        title="DINO",
        parts=("prototypes",),
        section=DinoConfig,
        hooks=(
            MethodHook(
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.dino.teacher_schedule(),
                    "views": cfg.loss.dino.global_views,
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="teacher, on the global views",
            ),
            MethodHook(
                "dino_centering",
                lambda cfg: {
                    "center_momentum": cfg.loss.dino.center_momentum,
                    "teacher_temperature": cfg.loss.dino.teacher_temperature,
                    "warmup_teacher_temperature": cfg.loss.dino.warmup_teacher_temperature,
                    "warmup_epochs": cfg.loss.dino.warmup_teacher_epochs,
                },
            ),
            MethodHook(
                "freeze_prototypes",
                lambda cfg: {"epochs": cfg.loss.dino.freeze_last_layer_epochs},
                role="last layer",
            ),
        ),
        order=50,
    )
)

"""The settings of DINO: ``loss.dino``, which DINOv2, DINOv3 and iBOT read too. Torch-free
sections, declared field by field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

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

"""The settings of distillation: ``loss.distillation``, with its teacher. Torch-free sections,
declared field by field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from hookbus.engine.config.backbone import BackboneConfig
from hookbus.engine.section import MAX_PIXELS, Positive, Section


class TeacherConfig(BackboneConfig):
    """The frozen teacher: a backbone by name with its options (as ``model.backbone``),
    its weights, and the images it reads."""

    name: str = Field(
        "",
        description="the teacher's backbone, named as model.backbone.name (a timm:NAME.TAG "
        "brings timm's pretrained weights); required",
    )
    weights: Path | None = Field(
        None,
        description="the teacher's weights file (read as model.backbone.weights is); "
        "required unless name carries a timm tag. Recorded by its SHA-256: a resume with "
        "another file is refused",
    )
    image_size: int | None = Field(
        None,
        ge=1,
        le=MAX_PIXELS,
        description="side the views are resized to for the teacher; None: the views' own",
    )
    mean: tuple[float, ...] | None = Field(
        None,
        description="the teacher's normalisation mean, per channel: views are taken back "
        "to pixels with data.torchvision.mean and std and normalised with this; None: as the "
        "student's views",
    )
    std: tuple[Positive, ...] | None = Field(
        None, description="the teacher's normalisation standard deviation (with mean)"
    )

    @model_validator(mode="after")
    def _mean_and_std_together(self) -> TeacherConfig:
        if (self.mean is None) != (self.std is None):
            raise ValueError(
                "loss.distillation.teacher.mean and loss.distillation.teacher.std go "
                "together: give both, or neither"
            )
        if self.mean is not None and self.std is not None and len(self.mean) != len(self.std):
            raise ValueError(f"mean has {len(self.mean)} channels, std {len(self.std)}")
        return self

    def backbone(self, image_size: int) -> BackboneConfig:
        """The teacher's backbone section, its image side ``image_size`` when unset."""
        fields = self.model_dump(exclude={"mean", "std"})
        fields["image_size"] = self.image_size or image_size
        return BackboneConfig(**fields)


class DistillationConfig(Section):
    """Distillation from a frozen teacher: global (KL over a queue of teacher
    embeddings), dense (MSE on patch features), or both."""

    teacher: TeacherConfig = Field(default_factory=TeacherConfig, description="the teacher")
    mode: Literal["global", "dense", "both"] = Field(
        "global",
        description="global: KL between student and teacher distributions over the queue; "
        "dense: MSE between the student's patch features (projected, resized to the "
        "teacher's grid) and the teacher's; both: their sum",
    )
    queue_size: int = Field(
        2048, ge=1, le=1_000_000, description="teacher embeddings kept as pseudo-classes"
    )
    temperature: float = Field(
        0.07, ge=1e-3, le=100, description="softmax temperature of both distributions"
    )
    dense_weight: float = Field(1.0, ge=0, le=1000, description="weight of the dense loss")

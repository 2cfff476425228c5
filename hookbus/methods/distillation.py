"""Distillation: a student learns a frozen teacher's image and patch features.

The teacher is any backbone hookbus can build, with weights (``loss.distillation.teacher``:
its own name, weights file, image size and normalisation); the student is the run's
backbone, of any other architecture. Global: the student's projected embedding and the
teacher's, each compared with a queue of past teacher embeddings, give two distributions
whose KL divergence is the loss. Dense: the student's patch (or spatial) features,
projected and resized to the teacher's grid, regress the teacher's patch features (MSE).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from hookbus.engine.config.backbone import BackboneConfig
from hookbus.engine.config.model_names import split_tag
from hookbus.engine.methods.entries import MethodHook, MethodSpec, Views, register_method
from hookbus.engine.section import MAX_PIXELS, Positive, Section

if TYPE_CHECKING:
    from hookbus.engine.config import Config


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


def check_distillation(cfg: Config) -> None:
    """A teacher is named, with weights (a file, or timm's by a tag); the student has no
    projection head of ``model.head`` (its projection is the method's own)."""
    teacher = cfg.loss.distillation.teacher
    if not teacher.name:
        raise ValueError(
            "loss.distillation.teacher.name: name the teacher's backbone (and its weights "
            "in loss.distillation.teacher.weights)"
        )
    if teacher.weights is None and not split_tag(teacher.name.removeprefix("timm:"))[1]:
        raise ValueError(
            "loss.distillation.teacher.weights: a teacher needs its weights: a file, or "
            "timm's pretrained weights by a tag in teacher.name (timm:NAME.TAG)"
        )
    head = cfg.model.head.changed_keys()
    if head:
        raise ValueError(
            f"model.head.{head[0]}: loss.name distillation projects the student linearly "
            "onto the teacher's width, so model.head is not used; remove it"
        )


DISTILLATION = register_method(
    MethodSpec(
        name="distillation",
        title="Distillation",
        views=Views(1, small_views=False, reason="compares each view with the teacher's"),
        section=DistillationConfig,
        hooks=(
            MethodHook(
                "distillation_teacher",
                lambda cfg: {
                    "queue_size": cfg.loss.distillation.queue_size,
                    "teacher": cfg.loss.distillation.teacher.weights
                    or cfg.loss.distillation.teacher.name,
                    "dense": cfg.loss.distillation.mode != "global",
                },
                role="frozen teacher and its queue",
            ),
        ),
        check=check_distillation,
        model="hookbus.parts.models.distillation:build_distillation_model",
        order=130,
    )
)

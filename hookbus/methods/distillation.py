"""Distillation: a student learns a frozen teacher's image and patch features.

The teacher is any backbone hookbus can build, with weights (``loss.distillation.teacher``:
its own name, weights file, image size and normalisation); the student is the run's
backbone, of any other architecture. Global: the student's projected embedding and the
teacher's, each compared with a queue of past teacher embeddings, give two distributions
whose KL divergence is the loss. Dense: the student's patch (or spatial) features,
projected and resized to the teacher's grid, regress the teacher's patch features (MSE).
"""

from __future__ import annotations

from typing import Any

from hookbus.engine.config.model_names import split_tag
from hookbus.engine.methods.composition import Setting, clamp, power_of_two_below
from hookbus.engine.methods.entries import MethodHook, MethodSpec, Views, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.distillation import DistillationConfig


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


def compose_distillation(setting: Setting) -> dict[str, Any]:
    """Distillation of the teacher the user names (``loss.distillation.teacher.name`` and
    its weights, among the overrides: validation refuses a run without them): the global
    loss at temperature 0.07 over a queue of about half the train images' teacher
    embeddings (a power of two, 64 to 2048, the recipe's), the teacher reading the
    images' channels."""
    return {
        "loss": {
            "distillation": {
                "mode": "global",
                "temperature": 0.07,
                "queue_size": clamp(power_of_two_below(setting.images / 2), 64, 2048),
                "teacher": {"in_channels": setting.channels},
            }
        }
    }


DISTILLATION = register_method(
    MethodSpec[Config](
        name="distillation",
        title="Distillation",
        views=Views(1, small_views=False, reason="compares each view with the teacher's"),
        section=DistillationConfig,
        hooks=(
            MethodHook[Config](
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
        compose=compose_distillation,
        order=130,
    )
)

"""DINO: self-distillation from a momentum teacher, with centering and sharpening."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import (
    Setting,
    clamp,
    ema_momentum,
    multi_crop,
    power_of_two_below,
)
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.dino import DinoConfig


def dino_head(setting: Setting) -> dict[str, Any]:
    """DINO's head and last layer, as they follow from the setting: hidden layers of 512
    (256 after a backbone of 64 features or fewer) with BatchNorm (without it DINO
    collapsed on the digits), a bottleneck of 64 (256, the paper's, on large data), and a
    weight-normalised last layer of about 0.8 outputs per train image (a power of two,
    256 to 65,536: 1024 for the digits, the paper's 65,536 for ImageNet)."""
    hidden = setting.head_hidden
    bottleneck = 256 if setting.large_data else 64
    return {
        "head": {"dims": ["backbone", hidden, hidden, bottleneck], "batch_norm": True},
        "prototypes": {
            "count": clamp(power_of_two_below(setting.images * 0.8), 256, 65_536),
            "weight_norm": True,
        },
    }


def dino_loss(setting: Setting) -> dict[str, Any]:
    """``loss.dino`` of a composed run: teacher temperature 0.04 from the start (a warm-up
    to 0.07 collapsed on the digits), student 0.1, the teacher's EMA from 0.99 (0.996 on
    large data) to 1, the last layer frozen for the first epoch."""
    return {
        "student_temperature": 0.1,
        "teacher_temperature": 0.04,
        "warmup_teacher_temperature": 0.04,
        "warmup_teacher_epochs": 0,
        "momentum": ema_momentum(setting),
        "final_momentum": 1.0,
        "global_views": 2,
        "freeze_last_layer_epochs": 1,
    }


def compose_dino(setting: Setting) -> dict[str, Any]:
    """DINO: :func:`dino_head`, :func:`dino_loss` with centering at momentum 0.9, and 2
    small views (4 on a machine with CUDA)."""
    return {
        "data": {"small_views": multi_crop(setting, 2 if setting.laptop else 4)},
        "model": dino_head(setting),
        "loss": {"dino": {**dino_loss(setting), "center_momentum": 0.9}},
    }


DINO = register_method(
    MethodSpec[Config](
        name="dino",
        title="DINO",
        parts=("prototypes",),
        section=DinoConfig,
        hooks=(
            MethodHook[Config](
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.dino.teacher_schedule(),
                    "views": cfg.loss.dino.global_views,
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="teacher, on the global views",
            ),
            MethodHook[Config](
                "dino_centering",
                lambda cfg: {
                    "center_momentum": cfg.loss.dino.center_momentum,
                    "teacher_temperature": cfg.loss.dino.teacher_temperature,
                    "warmup_teacher_temperature": cfg.loss.dino.warmup_teacher_temperature,
                    "warmup_epochs": cfg.loss.dino.warmup_teacher_epochs,
                },
            ),
            MethodHook[Config](
                "freeze_prototypes",
                lambda cfg: {"epochs": cfg.loss.dino.freeze_last_layer_epochs},
                role="last layer",
            ),
        ),
        compose=compose_dino,
        order=50,
    )
)

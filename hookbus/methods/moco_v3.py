"""MoCo v3: a momentum encoder gives the keys of the global batch for the online
predictor's queries; no queue."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, ema_momentum
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.moco_v3 import MocoV3Config


def compose_moco_v3(setting: Setting) -> dict[str, Any]:
    """MoCo v3: a 512-128 projector and predictor with BatchNorm, temperature 0.2, the
    momentum encoder's EMA from 0.99 (0.996 on large data) to 1."""
    return {
        "model": {
            "head": {"dims": ["backbone", 512, 128], "batch_norm": True},
            "predictor": {"dims": [128, 512, 128], "batch_norm": True},
        },
        "loss": {
            "moco_v3": {
                "temperature": 0.2,
                "momentum": ema_momentum(setting),
                "final_momentum": 1.0,
            }
        },
    }


MOCO_V3 = register_method(
    MethodSpec[Config](
        name="moco_v3",
        title="MoCo v3",
        parts=("predictor",),
        section=MocoV3Config,
        hooks=(
            MethodHook[Config](
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.moco_v3.teacher_schedule(),
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="momentum encoder",
            ),
        ),
        compose=compose_moco_v3,
        order=20,
    )
)

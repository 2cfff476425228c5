"""BYOL: the online predictor regresses a target network, an EMA of the online one."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.byol import ByolConfig


def compose_byol(setting: Setting) -> dict[str, Any]:
    """BYOL: projector and predictor 512 to 128 with BatchNorm, the target's EMA from 0.96
    (0.99 on large data) to 1, batches of 128 at most and lr 2e-3 (at 256 one digits seed
    stayed near random init; 128 fixed it)."""
    mlp = {"dims": ["backbone", 512, 128], "batch_norm": True}
    return {
        "data": {"batch_size": min(setting.batch_size, 128)},
        "model": {"head": mlp, "predictor": {"dims": [128, 512, 128], "batch_norm": True}},
        "loss": {"byol": {"momentum": 0.99 if setting.large_data else 0.96, "final_momentum": 1.0}},
        "optimizer": {"lr": 0.002},
    }


BYOL = register_method(
    MethodSpec[Config](
        name="byol",
        title="BYOL",
        parts=("predictor",),
        section=ByolConfig,
        hooks=(
            MethodHook[Config](
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.byol.teacher_schedule(),
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="target network",
            ),
        ),
        compose=compose_byol,
        order=30,
    )
)

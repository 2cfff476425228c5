"""SimSiam: a predictor and a stop-gradient, without a momentum encoder or negatives."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.parts.config import Config


def compose_simsiam(setting: Setting) -> dict[str, Any]:
    """SimSiam: a 512-128 projector, a 64-wide bottleneck predictor, batches of 128 at
    most and lr 2e-3 (the digits' measured setting)."""
    return {
        "data": {"batch_size": min(setting.batch_size, 128)},
        "model": {
            "head": {"dims": ["backbone", 512, 128], "batch_norm": True},
            "predictor": {"dims": [128, 64, 128], "batch_norm": True},
        },
        "optimizer": {"lr": 0.002},
    }


SIMSIAM = register_method(
    MethodSpec[Config](
        name="simsiam",
        title="SimSiam",
        parts=("predictor",),
        compose=compose_simsiam,
        order=80,
    )
)

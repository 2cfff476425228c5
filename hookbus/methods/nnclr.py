"""NNCLR: the nearest neighbour in a support set of earlier embeddings as the positive."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, clamp, power_of_two_below
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.nnclr import NnclrConfig


def compose_nnclr(setting: Setting) -> dict[str, Any]:
    """NNCLR: a 512-128 projector, a 512-wide predictor, temperature 0.1 and a support
    set of about half the train images (a power of two, 64 to 65,536)."""
    return {
        "model": {
            "head": {"dims": ["backbone", 512, 128], "batch_norm": True},
            "predictor": {"dims": [128, 512, 128], "batch_norm": True},
        },
        "loss": {
            "nnclr": {
                "temperature": 0.1,
                "queue_size": clamp(power_of_two_below(setting.images / 2), 64, 65_536),
            }
        },
    }


NNCLR = register_method(
    MethodSpec[Config](
        name="nnclr",
        title="NNCLR",
        parts=("predictor",),
        section=NnclrConfig,
        hooks=(
            MethodHook[Config](
                "nnclr_support",
                lambda cfg: {"size": cfg.loss.nnclr.queue_size},
                role="the support set of nearest neighbours",
            ),
        ),
        compose=compose_nnclr,
        order=90,
    )
)

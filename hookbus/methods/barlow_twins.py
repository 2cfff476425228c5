"""Barlow Twins: the cross-correlation of two views' embeddings driven toward the identity."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.barlow_twins import BarlowTwinsConfig


def compose_barlow_twins(setting: Setting) -> dict[str, Any]:
    """Barlow Twins: a 512-512-512 projector with BatchNorm and lambda 0.005 (the digits'
    measured setting)."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 512, 512], "batch_norm": True}},
        "loss": {"barlow_twins": {"lambd": 0.005}},
    }


BARLOW_TWINS = register_method(
    MethodSpec[Config](
        name="barlow_twins",
        title="Barlow Twins",
        section=BarlowTwinsConfig,
        compose=compose_barlow_twins,
        order=60,
    )
)

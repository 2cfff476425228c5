"""Barlow Twins: the cross-correlation of two views' embeddings driven toward the identity."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.engine.section import Section


class BarlowTwinsConfig(Section):
    """Barlow Twins: the cross-correlation of two views driven toward the identity."""

    lambd: float = Field(
        0.005, ge=0, le=100, description="lambda, the weight of the off-diagonal terms"
    )
    eps: float = Field(1e-5, gt=0, le=1, description="variance epsilon of the BatchNorm")


def compose_barlow_twins(setting: Setting) -> dict[str, Any]:
    """Barlow Twins: a 512-512-512 projector with BatchNorm and lambda 0.005 (the digits'
    measured setting)."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 512, 512], "batch_norm": True}},
        "loss": {"barlow_twins": {"lambd": 0.005}},
    }


BARLOW_TWINS = register_method(
    MethodSpec(
        name="barlow_twins",
        title="Barlow Twins",
        section=BarlowTwinsConfig,
        compose=compose_barlow_twins,
        order=60,
    )
)

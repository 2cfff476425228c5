"""Barlow Twins: the cross-correlation of two views' embeddings driven toward the identity."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.methods import MethodSpec, register_method
from hookbus.engine.section import Section


class BarlowTwinsConfig(Section):
    """Barlow Twins: the cross-correlation of two views driven toward the identity."""

    lambd: float = Field(
        0.005, ge=0, le=100, description="lambda, the weight of the off-diagonal terms"
    )
    eps: float = Field(1e-5, gt=0, le=1, description="variance epsilon of the BatchNorm")


BARLOW_TWINS = register_method(
    MethodSpec(name="barlow_twins", title="Barlow Twins", section=BarlowTwinsConfig, order=60)
)

"""The settings of Barlow Twins: ``loss.barlow_twins``. Torch-free sections, declared field by
field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section


class BarlowTwinsConfig(Section):
    """Barlow Twins: the cross-correlation of two views driven toward the identity."""

    lambd: float = Field(
        0.005, ge=0, le=100, description="lambda, the weight of the off-diagonal terms"
    )
    eps: float = Field(1e-5, gt=0, le=1, description="variance epsilon of the BatchNorm")

"""VICReg: invariance, variance and covariance terms on two views' embeddings."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.engine.section import Section


class VicregConfig(Section):
    """VICReg: invariance, variance and covariance terms, weighted as in the paper."""

    sim_coeff: float = Field(
        25.0, ge=0, le=10_000, description="lambda, the weight of the invariance (MSE) term"
    )
    std_coeff: float = Field(
        25.0,
        ge=0,
        le=10_000,
        description="mu, the weight of the variance (std hinge) terms, averaged over the "
        "two branches as in the authors' code",
    )
    cov_coeff: float = Field(
        1.0, ge=0, le=10_000, description="nu, the weight of the covariance terms"
    )


def compose_vicreg(setting: Setting) -> dict[str, Any]:
    """VICReg: a 512-512-512 expander with BatchNorm and the paper's coefficients 25, 25
    and 1."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 512, 512], "batch_norm": True}},
        "loss": {"vicreg": {"sim_coeff": 25.0, "std_coeff": 25.0, "cov_coeff": 1.0}},
    }


VICREG = register_method(
    MethodSpec(
        name="vicreg", title="VICReg", section=VicregConfig, compose=compose_vicreg, order=70
    )
)

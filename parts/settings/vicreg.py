"""The settings of VICReg: ``loss.vicreg``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

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

"""VICReg: invariance, variance and covariance terms on two views' embeddings."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.vicreg import VicregConfig


def compose_vicreg(setting: Setting) -> dict[str, Any]:
    """VICReg: a 512-512-512 expander with BatchNorm and the paper's coefficients 25, 25
    and 1."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 512, 512], "batch_norm": True}},
        "loss": {"vicreg": {"sim_coeff": 25.0, "std_coeff": 25.0, "cov_coeff": 1.0}},
    }


VICREG = register_method(
    MethodSpec[Config](
        name="vicreg", title="VICReg", section=VicregConfig, compose=compose_vicreg, order=70
    )
)

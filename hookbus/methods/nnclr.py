"""NNCLR: the nearest neighbour in a support set of earlier embeddings as the positive."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.methods import MethodHook, MethodSpec, register_method
from hookbus.engine.section import Section


class NnclrConfig(Section):
    """NNCLR: the nearest neighbour in a support set of earlier embeddings as the positive."""

    temperature: float = Field(0.1, ge=1e-3, le=100, description="softmax temperature tau")
    queue_size: int = Field(
        98_304,
        ge=1,
        le=10**7,
        description="embeddings in the support set (the first view's, of every rank)",
    )


NNCLR = register_method(
    MethodSpec(
        name="nnclr",
        title="NNCLR",
        parts=("predictor",),
        section=NnclrConfig,
        hooks=(
            MethodHook(
                "nnclr_support",
                lambda cfg: {"size": cfg.loss.nnclr.queue_size},
                role="the support set of nearest neighbours",
            ),
        ),
        order=90,
    )
)

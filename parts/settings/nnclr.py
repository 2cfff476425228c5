"""The settings of NNCLR: ``loss.nnclr``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

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

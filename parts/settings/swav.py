"""The settings of SwAV: ``loss.swav``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section


class SwavConfig(Section):
    """SwAV: swapped prediction of Sinkhorn-Knopp codes."""

    temperature: float = Field(
        0.1, ge=1e-3, le=100, description="softmax temperature of the predictions"
    )
    epsilon: float = Field(
        0.05, ge=1e-4, le=100, description="Sinkhorn-Knopp entropy regularisation"
    )
    sinkhorn_iterations: int = Field(3, ge=1, le=1000, description="Sinkhorn-Knopp iterations")
    assign_views: int = Field(2, ge=1, le=64, description="the first N views get codes")
    freeze_prototypes_iterations: int = Field(
        0, ge=0, le=10**9, description="prototypes get no update in the first N train iterations"
    )
    queue_size: int = Field(
        0, ge=0, le=10**7, description="embeddings queued per assigned view; 0: off"
    )
    queue_start_epoch: int = Field(
        0, ge=0, le=100_000, description="first epoch (0-based) with a queue"
    )

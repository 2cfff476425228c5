"""The settings of MoCo v3: ``loss.moco_v3``. Torch-free sections, declared field by field in
the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import MomentumSchedule


class MocoV3Config(MomentumSchedule):
    """MoCo v3: the momentum encoder (an EMA of backbone and projector) gives the keys of
    the global batch for the online predictor's queries; no queue."""

    temperature: float = Field(
        0.2, ge=1e-3, le=100, description="softmax temperature tau (the loss is scaled by 2 tau)"
    )

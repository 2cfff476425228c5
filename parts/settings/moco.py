"""The settings of MoCo: ``loss.moco``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import MomentumSchedule


class MocoConfig(MomentumSchedule):
    """MoCo v2: the momentum key encoder and the queue of keys."""

    temperature: float = Field(0.2, ge=1e-3, le=100, description="softmax temperature")
    queue_size: int = Field(1024, ge=1, le=10**7, description="keys kept as negatives")
    shuffle_bn: bool = Field(
        True,
        description=(
            "with several ranks, the key encoder's BatchNorm sees a shuffled share of the "
            "global batch (shuffle-BN), so its statistics do not pair queries with keys"
        ),
    )

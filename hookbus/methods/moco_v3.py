"""MoCo v3: a momentum encoder gives the keys of the global batch for the online
predictor's queries; no queue."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.methods import MethodHook, MethodSpec, register_method
from hookbus.engine.section import MomentumSchedule


class MocoV3Config(MomentumSchedule):
    """MoCo v3: the momentum encoder (an EMA of backbone and projector) gives the keys of
    the global batch for the online predictor's queries; no queue."""

    temperature: float = Field(
        0.2, ge=1e-3, le=100, description="softmax temperature tau (the loss is scaled by 2 tau)"
    )


MOCO_V3 = register_method(
    MethodSpec(
        name="moco_v3",
        title="MoCo v3",
        parts=("predictor",),
        section=MocoV3Config,
        hooks=(
            MethodHook(
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.moco_v3.teacher_schedule(),
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="momentum encoder",
            ),
        ),
        order=20,
    )
)

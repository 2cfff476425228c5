"""BYOL: the online predictor regresses a target network, an EMA of the online one."""

from __future__ import annotations

from hookbus.engine.methods import MethodHook, MethodSpec, register_method
from hookbus.engine.section import MomentumSchedule


class ByolConfig(MomentumSchedule):
    """BYOL: the target network, an EMA of the online backbone and projector."""


BYOL = register_method(
    MethodSpec(
        name="byol",
        title="BYOL",
        parts=("predictor",),
        section=ByolConfig,
        hooks=(
            MethodHook(
                "momentum_teacher",
                lambda cfg: {
                    **cfg.loss.byol.teacher_schedule(),
                    "shuffle_seed": cfg.trainer.seed,
                },
                role="target network",
            ),
        ),
        order=30,
    )
)

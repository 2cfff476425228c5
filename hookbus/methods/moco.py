"""MoCo v2: a momentum key encoder and a queue of its keys as the negatives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from hookbus.engine.methods.composition import Setting, clamp, power_of_two_below
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.engine.section import MomentumSchedule

if TYPE_CHECKING:
    from hookbus.engine.config import Config


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


def _teacher(cfg: Config) -> dict[str, Any]:
    moco: MocoConfig = cfg.loss.moco
    return {
        **moco.teacher_schedule(),
        "shuffle_bn": moco.shuffle_bn,
        "shuffle_seed": cfg.trainer.seed,
    }


def compose_moco(setting: Setting) -> dict[str, Any]:
    """MoCo v2: a 512-128 head, temperature 0.2, a queue of about half the train images
    (a power of two, 64 to 65,536: a queue longer than the data would hold an image's own
    older keys), the key encoder's EMA from 0.99 (0.999 on large data) to 1."""
    return {
        "model": {"head": {"dims": ["backbone", 512, 128], "batch_norm": True}},
        "loss": {
            "moco": {
                "temperature": 0.2,
                "queue_size": clamp(power_of_two_below(setting.images / 2), 64, 65_536),
                "momentum": 0.999 if setting.large_data else 0.99,
                "final_momentum": 1.0,
            }
        },
    }


MOCO = register_method(
    MethodSpec(
        name="moco",
        title="MoCo v2",
        section=MocoConfig,
        hooks=(
            MethodHook("momentum_teacher", _teacher, role="key encoder"),
            MethodHook("key_queue", lambda cfg: {"size": cfg.loss.moco.queue_size}),
        ),
        compose=compose_moco,
        order=10,
    )
)

"""MoCo v2: a momentum key encoder and a queue of its keys as the negatives."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, clamp, power_of_two_below
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.moco import MocoConfig


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
    MethodSpec[Config](
        name="moco",
        title="MoCo v2",
        section=MocoConfig,
        hooks=(
            MethodHook[Config]("momentum_teacher", _teacher, role="key encoder"),
            MethodHook[Config]("key_queue", lambda cfg: {"size": cfg.loss.moco.queue_size}),
        ),
        compose=compose_moco,
        order=10,
    )
)

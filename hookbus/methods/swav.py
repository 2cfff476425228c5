"""SwAV: swapped prediction of Sinkhorn-Knopp codes over a set of prototypes."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, clamp, multi_crop
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.swav import SwavConfig


def compose_swav(setting: Setting) -> dict[str, Any]:
    """SwAV: a 512-128 head, about one prototype per 40 train images (10 to 3000: 32 for
    the digits, SwAV's 3000 for ImageNet), 2 small views, temperature 0.1, Sinkhorn-Knopp
    at epsilon 0.05 for 3 iterations, the prototypes frozen for the first 10 steps."""
    return {
        "data": {"small_views": multi_crop(setting, 2)},
        "model": {
            "head": {"dims": ["backbone", 512, 128], "batch_norm": True},
            "prototypes": {"count": clamp(setting.images // 40, 10, 3000)},
        },
        "loss": {
            "swav": {
                "temperature": 0.1,
                "epsilon": 0.05,
                "sinkhorn_iterations": 3,
                "assign_views": 2,
                "freeze_prototypes_iterations": 10,
            }
        },
    }


SWAV = register_method(
    MethodSpec[Config](
        name="swav",
        title="SwAV",
        parts=("prototypes",),
        section=SwavConfig,
        hooks=(
            MethodHook[Config]("prototype_normalization"),
            MethodHook[Config](
                "freeze_prototypes",
                lambda cfg: {"iterations": cfg.loss.swav.freeze_prototypes_iterations},
            ),
            MethodHook[Config](
                "swav_queue",
                lambda cfg: {
                    "size": cfg.loss.swav.queue_size,
                    "start_epoch": cfg.loss.swav.queue_start_epoch,
                    "assign_views": cfg.loss.swav.assign_views,
                },
                when=lambda cfg: cfg.loss.swav.queue_size > 0,
                role="when `loss.swav.queue_size` > 0",
            ),
        ),
        compose=compose_swav,
        order=40,
    )
)

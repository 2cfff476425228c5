"""LeJEPA: views of an image predicted from the mean of its global views, with SIGReg
pushing the projections toward an isotropic Gaussian (Balestriero and LeCun, "LeJEPA:
Provable and Scalable Self-Supervised Learning Without the Heuristics", 2025)."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting, multi_crop
from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.parts.config import Config
from hookbus.parts.settings.lejepa import LejepaConfig


def check_lejepa(cfg: Config) -> None:
    """The global views are among the large views (``data.num_views``)."""
    lejepa = cfg.loss.lejepa
    if lejepa.global_views > cfg.data.num_views:
        raise ValueError(
            f"loss.lejepa.global_views is {lejepa.global_views} but there are "
            f"{cfg.data.num_views} large views (data.num_views): lower it or add views"
        )


def compose_lejepa(setting: Setting) -> dict[str, Any]:
    """LeJEPA on any backbone: a projector of two hidden layers of 512 (256 after a
    backbone of 64 features or fewer) with BatchNorm onto 16 dimensions (the digits
    recipe's shape), the 2 global views and 2 small ones (6 with CUDA, the authors'
    count) predicting the global views' mean, SIGReg at weight 0.05 over 1024
    directions, and weight decay 0.05."""
    hidden = setting.head_hidden
    return {
        "data": {"small_views": multi_crop(setting, 2 if setting.laptop else 6)},
        "model": {"head": {"dims": ["backbone", hidden, hidden, 16], "batch_norm": True}},
        "loss": {"lejepa": {"sigreg_weight": 0.05, "global_views": 2, "slices": 1024}},
        "optimizer": {"weight_decay": 0.05},
    }


LEJEPA = register_method(
    MethodSpec[Config](
        name="lejepa",
        title="LeJEPA",
        section=LejepaConfig,
        exclusive_section=True,
        check=check_lejepa,
        compose=compose_lejepa,
        order=120,
    )
)

"""LeJEPA: views of an image predicted from the mean of its global views, with SIGReg
pushing the projections toward an isotropic Gaussian (Balestriero and LeCun, "LeJEPA:
Provable and Scalable Self-Supervised Learning Without the Heuristics", 2025)."""

from __future__ import annotations

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


LEJEPA = register_method(
    MethodSpec[Config](
        name="lejepa",
        title="LeJEPA",
        section=LejepaConfig,
        exclusive_section=True,
        check=check_lejepa,
        order=120,
    )
)

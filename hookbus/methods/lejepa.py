"""LeJEPA: views of an image predicted from the mean of its global views, with SIGReg
pushing the projections toward an isotropic Gaussian (Balestriero and LeCun, "LeJEPA:
Provable and Scalable Self-Supervised Learning Without the Heuristics", 2025)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from hookbus.engine.methods.entries import MethodSpec, register_method
from hookbus.engine.section import Section

if TYPE_CHECKING:
    from hookbus.engine.config import Config


class LejepaConfig(Section):
    """LeJEPA's one weight and SIGReg's sketch: random unit directions, and the
    Epps-Pulley statistic integrated on a grid of frequencies (the authors' 17 knots on
    ``[0, 3]``)."""

    sigreg_weight: float = Field(
        0.05,
        ge=0,
        le=1,
        description="lambda: the loss is lambda * SIGReg + (1 - lambda) * prediction "
        "(the authors' default 0.05; the paper explores 0.01-0.1)",
    )
    global_views: int = Field(
        2,
        ge=1,
        le=64,
        description="the first views (of data.num_views) whose mean projection every view predicts",
    )
    slices: int = Field(
        1024, ge=1, le=65_536, description="random unit directions SIGReg projects onto per step"
    )
    knots: int = Field(
        17, ge=2, le=1025, description="frequencies of the trapezoidal grid on [0, t_max]"
    )
    t_max: float = Field(3.0, gt=0, le=100, description="highest frequency of the grid")


def check_lejepa(cfg: Config) -> None:
    """The global views are among the large views (``data.num_views``)."""
    lejepa = cfg.loss.lejepa
    if lejepa.global_views > cfg.data.num_views:
        raise ValueError(
            f"loss.lejepa.global_views is {lejepa.global_views} but there are "
            f"{cfg.data.num_views} large views (data.num_views): lower it or add views"
        )


LEJEPA = register_method(
    MethodSpec(
        name="lejepa",
        title="LeJEPA",
        section=LejepaConfig,
        exclusive_section=True,
        check=check_lejepa,
        order=120,
    )
)

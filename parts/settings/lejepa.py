"""The settings of LeJEPA: ``loss.lejepa``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section


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

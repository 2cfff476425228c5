"""The base of every config section, and the bounded number types the sections share.

The config's sections (:mod:`hookbus.engine.config`) and the SSL methods' own sections
(``hookbus.methods``) derive from :class:`Section`. It stands apart from the config
package because the method entries, which the config loads while it is being imported,
need it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Size = Annotated[int, Field(ge=1, le=65_536)]
"""A layer width or a count of features: 1 to 65536."""

Positive = Annotated[float, Field(gt=0)]
"""A number above zero (a standard deviation to divide by)."""

Decay = Annotated[float, Field(ge=0, lt=1)]
"""A decay rate of a running average: 0 to just below 1."""

MAX_PIXELS = 4096
"""Largest image side accepted, in pixels (a 4096x4096 RGB float image is 200 MB)."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are checked on set."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    def changed_keys(self) -> list[str]:
        """The keys whose value differs from their default, in field order; a nested
        section's as ``section.key``. A key set to its default value is not changed."""
        changed = []
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            default = field.get_default(call_default_factory=True)
            if isinstance(value, Section) and type(value) is type(default):
                changed += [f"{name}.{key}" for key in value.changed_keys()]
            elif value != default:
                changed.append(name)
        return changed


class MomentumSchedule(Section):
    """An EMA momentum rising from ``momentum`` to ``final_momentum`` over the run's train
    iterations, on a half cosine or on a straight line (``momentum_schedule``)."""

    momentum: float = Field(0.99, ge=0, le=1, description="EMA momentum at the first step")
    final_momentum: float = Field(1.0, ge=0, le=1, description="EMA momentum at the last step")
    momentum_schedule: Literal["cosine", "linear"] = Field(
        "cosine",
        description="how the EMA momentum rises from momentum to final_momentum over the "
        "train iterations: cosine, on a half cosine (slow, fast, slow); linear, by the same "
        "amount every step",
    )

    def teacher_schedule(self) -> dict[str, Any]:
        """The momentum teacher's schedule arguments: ``momentum``, ``final_momentum``
        and ``schedule``."""
        return {
            "momentum": self.momentum,
            "final_momentum": self.final_momentum,
            "schedule": self.momentum_schedule,
        }


class TokenTransformerSection(Section):
    """A narrow transformer over patch tokens with the fixed 2-D sine-cosine position
    embedding (a method's decoder or predictor): its ``width``, ``depth``, ``heads`` and
    ``mlp_dim`` are declared by the subclass; here, the rule that they fit together."""

    if TYPE_CHECKING:  # declared by the subclass, in its own order and with its defaults
        width: int
        heads: int

    @model_validator(mode="after")
    def _width_fits(self) -> TokenTransformerSection:
        if self.width % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide the width ({self.width})")
        if self.width % 4:
            raise ValueError(
                f"width ({self.width}) must be a multiple of 4: the fixed 2-D sine-cosine "
                "position embedding gives each axis a sine and a cosine half"
            )
        return self

"""The ``loss`` section: the loss by name, the settings of each method and the classifier's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from hookbus.engine.config.methods import (
    METHOD_ENTRIES,
    loss_names,
    method_loss_sections,
)
from hookbus.engine.methods.entries import default_method
from hookbus.engine.section import Section


class CrossEntropyConfig(Section):
    """The classification loss of linear evaluation and fine-tuning."""

    label_smoothing: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="the target puts 1 - label_smoothing + label_smoothing / C on the label "
        "and label_smoothing / C on each of the C classes' others (fine-tuning ViTs: 0.1)",
    )


class LossName(Section):
    name: str = Field(
        default_method().name,
        description="loss, by its registered name; it selects the method and its hooks: "
        + loss_names(METHOD_ENTRIES),
    )


class ClassifierLoss(Section):
    cross_entropy: CrossEntropyConfig = Field(default_factory=CrossEntropyConfig)


if TYPE_CHECKING:

    class LossConfig(ClassifierLoss, LossName):
        def __getattr__(self, key: str) -> Any:
            """The methods' settings (``loss.<method>``, ``loss.<key>``)."""

else:

    class LossConfig(ClassifierLoss, method_loss_sections(LossName, METHOD_ENTRIES)):
        pass

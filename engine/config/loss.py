"""The ``loss`` section: the loss by name and the classifier's settings. Each SSL method's
settings (``loss.<method>``) are declared in the whole config, ``hookbus.parts.config``."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.section import Section

CLASSIFIER_LOSS = "cross_entropy"
"""The loss of the two evaluation protocols (linear evaluation, fine-tuning): not an SSL
method, it trains a classifier on one view of each image."""


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
        description="loss, by its registered name; it selects the method and its hooks",
    )


class ClassifierLoss(Section):
    cross_entropy: CrossEntropyConfig = Field(default_factory=CrossEntropyConfig)


class LossConfig(ClassifierLoss, LossName):
    """The kernel's part of ``loss``: the name and the classifier's settings."""

"""The two evaluation protocols of ``model``: linear evaluation and fine-tuning."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hookbus.engine.section import Section

FEATURE_NORM = (
    "normalise each feature dimension (BatchNorm without affine parameters) before the classifier"
)


class ClassifierProtocol(Section):
    """What linear evaluation and fine-tuning share: a linear classifier on the backbone's
    features, trained on the labels, from the backbone weights of ``checkpoint``."""

    enabled: bool = Field(False, description="train a classifier on the backbone")
    num_classes: int = Field(10, ge=2, le=100_000, description="classes of the linear classifier")
    feature_norm: bool = Field(
        True,
        description=FEATURE_NORM,
    )
    checkpoint: Path | None = Field(
        None,
        description="backbone weights to start from: a hookbus checkpoint or an exported "
        "state dict; None: random init",
    )


class LinearEvalConfig(ClassifierProtocol):
    """Linear evaluation: a linear classifier trained on a frozen backbone."""

    enabled: bool = Field(
        False,
        description="train a linear classifier on the frozen backbone; the SSL parts of the "
        "recipe (model.head, model.predictor, model.prototypes) are not built",
    )


class FineTuneConfig(ClassifierProtocol):
    """Fine-tuning: the backbone trained end to end with a linear classifier on the labels."""

    enabled: bool = Field(
        False,
        description="train the backbone and a linear classifier; the SSL parts of the recipe "
        "(model.head, model.predictor, model.prototypes) are not built",
    )
    feature_norm: bool = Field(
        False,
        description=FEATURE_NORM,
    )
    backbone_lr_scale: float = Field(
        1.0,
        gt=0,
        le=100,
        description="the backbone's learning rate as a multiple of the classifier's "
        "(optimizer.lr, on its schedule)",
    )
    layer_decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="ViT backbones: a parameter at depth d (0: patch embedding, class token, "
        "position embedding; i + 1: encoder layer i; L + 1: final LayerNorm, as the "
        "classifier) learns at lr * layer_decay^(L + 1 - d); 1: off",
    )

"""Models: backbones, heads, the self-supervised model, and the linear-evaluation and
fine-tuning models."""

from __future__ import annotations

from hookbus.parts.models.build import BACKBONES, backbone_config, build_model, build_small_cnn
from hookbus.parts.models.fine_tune import FineTuneModel
from hookbus.parts.models.heads import MLPHead, Prototypes
from hookbus.parts.models.linear_eval import LinearEvalModel
from hookbus.parts.models.mae import MaskedAutoencoder
from hookbus.parts.models.small_cnn import SmallCNN
from hookbus.parts.models.ssl_model import ModelOutput, SSLModel
from hookbus.parts.models.vit import ViTBackbone

__all__ = [
    "BACKBONES",
    "FineTuneModel",
    "LinearEvalModel",
    "MLPHead",
    "MaskedAutoencoder",
    "ModelOutput",
    "Prototypes",
    "SSLModel",
    "SmallCNN",
    "ViTBackbone",
    "backbone_config",
    "build_model",
    "build_small_cnn",
]

"""Models: backbones, heads, the self-supervised model and the linear-evaluation model."""

from __future__ import annotations

from engine.models.build import BACKBONES, build_model, build_small_cnn
from engine.models.heads import MLPHead, Prototypes
from engine.models.linear_eval import LinearEvalModel
from engine.models.small_cnn import SmallCNN
from engine.models.ssl_model import ModelOutput, SSLModel

__all__ = [
    "BACKBONES",
    "LinearEvalModel",
    "MLPHead",
    "ModelOutput",
    "Prototypes",
    "SSLModel",
    "SmallCNN",
    "build_model",
    "build_small_cnn",
]

"""Models: backbones, projection heads and the self-supervised model around them."""

from __future__ import annotations

from engine.models.build import BACKBONES, build_model, build_small_cnn
from engine.models.heads import MLPHead
from engine.models.small_cnn import SmallCNN
from engine.models.ssl_model import ModelOutput, SSLModel

__all__ = [
    "BACKBONES",
    "MLPHead",
    "ModelOutput",
    "SSLModel",
    "SmallCNN",
    "build_model",
    "build_small_cnn",
]

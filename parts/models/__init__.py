"""Models: backbones, heads, the self-supervised model, and the linear-evaluation and
fine-tuning models.

:class:`ViTBackbone` and :class:`MaskedAutoencoder` are loaded on first use: they import
torchvision (about a second), which a run of another backbone never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookbus.parts.models.build import BACKBONES, backbone_config, build_model, build_small_cnn
from hookbus.parts.models.fine_tune import FineTuneModel
from hookbus.parts.models.heads import MLPHead, Prototypes
from hookbus.parts.models.linear_eval import LinearEvalModel
from hookbus.parts.models.small_cnn import SmallCNN
from hookbus.parts.models.ssl_model import ModelOutput, SSLModel

if TYPE_CHECKING:
    from hookbus.parts.models.mae import MaskedAutoencoder
    from hookbus.parts.models.vit import ViTBackbone

_ON_FIRST_USE = {
    "MaskedAutoencoder": "hookbus.parts.models.mae",
    "ViTBackbone": "hookbus.parts.models.vit",
}
"""``{public name: the module that defines it}`` for the names that import torchvision."""

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


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

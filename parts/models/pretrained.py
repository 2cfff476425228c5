"""Backbone weights read from a pretraining checkpoint or from an exported state dict."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from hookbus.engine.bounded_files import check_regular
from hookbus.engine.checkpoint_io import FORMAT
from hookbus.engine.errors import CheckpointError
from hookbus.engine.sharded_checkpoint import load_whole_checkpoint

BACKBONE_PREFIX = "backbone."
"""Prefix of the backbone's keys in an SSL model's state dict."""

CLASSIFIER_KEYS = ("fc.weight", "fc.bias")
"""Keys of torchvision's classifier, which an exported ResNet carries and a backbone lacks."""


def backbone_state_dict(model_weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """The ``backbone.*`` entries of a model's state dict, prefix removed."""
    return {
        key.removeprefix(BACKBONE_PREFIX): value
        for key, value in model_weights.items()
        if key.startswith(BACKBONE_PREFIX)
    }


def read_backbone_weights(path: Path) -> dict[str, Tensor]:
    """The backbone weights in ``path``, keyed as the backbone's own state dict.

    ``path`` is a hookbus checkpoint (verified against its checksum file; its model's
    ``backbone.*`` entries are taken) or a plain state dict as ``hookbus export`` writes
    it (torchvision's ``fc.*`` dropped). Loaded with ``weights_only=True``.
    """
    check_regular(path, "weights file", error=CheckpointError)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except Exception as exc:
        raise CheckpointError(f"cannot load weights from {path}: {exc}") from exc
    if isinstance(loaded, dict) and loaded.get("format") == FORMAT:
        weights = backbone_state_dict(load_whole_checkpoint(path)["model"])
        if not weights:
            raise CheckpointError(f"checkpoint {path} holds no backbone weights")
        return weights
    if not isinstance(loaded, dict) or not all(isinstance(v, Tensor) for v in loaded.values()):
        raise CheckpointError(f"{path} is neither a hookbus checkpoint nor a state dict")
    return {key: value for key, value in loaded.items() if key not in CLASSIFIER_KEYS}


def load_backbone_weights(backbone: nn.Module, path: Path) -> None:
    """Load :func:`read_backbone_weights` (``path``) into ``backbone``, strictly."""
    try:
        backbone.load_state_dict(read_backbone_weights(path))
    except RuntimeError as exc:
        problem = str(exc).splitlines()[0]
        raise CheckpointError(f"weights in {path} do not fit the backbone: {problem}") from None

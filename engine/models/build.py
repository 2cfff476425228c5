"""Build the model of a run from its config; backbones are chosen by name."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from engine.config import BackboneConfig, Config
from engine.models.heads import MLPHead
from engine.models.small_cnn import SmallCNN
from engine.models.ssl_model import SSLModel
from engine.registry import Registry

BACKBONES: Registry[Callable[[BackboneConfig], nn.Module]] = Registry("backbone")
"""Builders ``(cfg.model.backbone) -> backbone`` with an ``out_dim``, by ``backbone.name``."""


@BACKBONES.register("small_cnn")
def build_small_cnn(cfg: BackboneConfig) -> SmallCNN:
    """:class:`SmallCNN` with the config's input channels and width."""
    return SmallCNN(in_channels=cfg.in_channels, width=cfg.width)


def build_model(cfg: Config) -> SSLModel:
    """The backbone named by ``model.backbone.name`` with an :class:`MLPHead` on top.

    Raises ``ValueError`` when ``model.head.dims[0]`` is not the backbone's feature size.
    """
    backbone = BACKBONES.get(cfg.model.backbone.name)(cfg.model.backbone)
    head_cfg = cfg.model.head
    if head_cfg.dims[0] != backbone.out_dim:
        raise ValueError(
            f"model.head.dims[0] is {head_cfg.dims[0]} but backbone "
            f"{cfg.model.backbone.name!r} gives {backbone.out_dim} features "
            f"(out_dim); set model.head.dims[0] to {backbone.out_dim}"
        )
    return SSLModel(backbone, MLPHead(head_cfg.dims, head_cfg.batch_norm))

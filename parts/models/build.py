"""Build the model of a run from its config; backbones are chosen by name."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from hookbus.engine.config import BackboneConfig, Config
from hookbus.engine.registry import Registry
from hookbus.parts.models.heads import MLPHead, Prototypes
from hookbus.parts.models.linear_eval import LinearEvalModel
from hookbus.parts.models.pretrained import load_backbone_weights
from hookbus.parts.models.resnet import build_resnet
from hookbus.parts.models.small_cnn import SmallCNN
from hookbus.parts.models.ssl_model import SSLModel

BACKBONES: Registry[Callable[[BackboneConfig], nn.Module]] = Registry("backbone")
"""Builders ``(cfg.model.backbone) -> backbone`` with an ``out_dim``, by ``backbone.name``."""


@BACKBONES.register("small_cnn")
def build_small_cnn(cfg: BackboneConfig) -> SmallCNN:
    """:class:`SmallCNN` with the config's input channels and width."""
    return SmallCNN(in_channels=cfg.in_channels, width=cfg.width)


@BACKBONES.register("resnet18")
def build_resnet18(cfg: BackboneConfig) -> nn.Module:
    """torchvision's ResNet-18 trunk (512 features), see :func:`build_resnet`."""
    return build_resnet("resnet18", in_channels=cfg.in_channels, small_stem=cfg.small_stem)


@BACKBONES.register("resnet50")
def build_resnet50(cfg: BackboneConfig) -> nn.Module:
    """torchvision's ResNet-50 trunk (2048 features), see :func:`build_resnet`."""
    return build_resnet("resnet50", in_channels=cfg.in_channels, small_stem=cfg.small_stem)


def build_model(cfg: Config, backbone: nn.Module | None = None) -> nn.Module:
    """The model of ``cfg``: an :class:`SSLModel`, or a :class:`LinearEvalModel` when
    ``model.linear_eval.enabled``.

    The SSL model is the backbone named by ``model.backbone.name``, an :class:`MLPHead`
    (``model.head``), and when configured a predictor MLP (``model.predictor``) and
    :class:`Prototypes` (``model.prototypes``). The linear-evaluation model loads its
    backbone from ``model.linear_eval.checkpoint`` when set. Raises ``ValueError`` when
    the sizes of consecutive parts do not match. A ``backbone`` given (with its
    ``out_dim``) replaces the one named.
    """
    model_cfg = cfg.model
    name = model_cfg.backbone.name if backbone is None else cfg.from_python.backbone
    if backbone is None:
        backbone = BACKBONES.get(model_cfg.backbone.name)(model_cfg.backbone)
    if model_cfg.linear_eval.enabled:
        if model_cfg.linear_eval.checkpoint is not None:
            load_backbone_weights(backbone, model_cfg.linear_eval.checkpoint)
        return LinearEvalModel(
            backbone,
            model_cfg.linear_eval.num_classes,
            feature_norm=model_cfg.linear_eval.feature_norm,
        )
    head_dims = model_cfg.head.dims
    if head_dims[0] != backbone.out_dim:
        raise ValueError(
            f"model.head.dims[0] is {head_dims[0]} but backbone "
            f"{name!r} gives {backbone.out_dim} features "
            f"(out_dim); set model.head.dims[0] to {backbone.out_dim}"
        )
    predictor = None
    if model_cfg.predictor.dims:
        if model_cfg.predictor.dims[0] != head_dims[-1]:
            raise ValueError(
                f"model.predictor.dims[0] is {model_cfg.predictor.dims[0]} but the head gives "
                f"{head_dims[-1]}; set it to model.head.dims[-1]"
            )
        predictor = MLPHead(model_cfg.predictor.dims, model_cfg.predictor.batch_norm)
    prototypes = None
    if model_cfg.prototypes.count:
        prototypes = Prototypes(
            head_dims[-1], model_cfg.prototypes.count, model_cfg.prototypes.weight_norm
        )
    return SSLModel(backbone, MLPHead(head_dims, model_cfg.head.batch_norm), predictor, prototypes)

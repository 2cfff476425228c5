"""Build the model of a run from its config; backbones are chosen by name."""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from torch import Tensor, nn

from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import CheckpointError, ConfigError
from hookbus.engine.methods.entries import method_of
from hookbus.engine.registry import Registry, UnknownNameError
from hookbus.parts.config import Config
from hookbus.parts.models.fine_tune import FineTuneModel
from hookbus.parts.models.linear_eval import LinearEvalModel
from hookbus.parts.models.presets import TIMM_PREFIX, TV_PREFIX, VIT_PRESETS, vit_sizes
from hookbus.parts.models.pretrained import load_backbone_weights
from hookbus.parts.models.small_cnn import SmallCNN
from hookbus.parts.models.ssl_model import SSLModel
from hookbus.parts.models.ssl_parts import ssl_parts
from hookbus.parts.models.timm_any import build_timm_model, check_timm_name, zero_timm_classifier

if TYPE_CHECKING:
    from hookbus.parts.models.vit import ViTBackbone

MethodModelBuilder = Callable[[Config, nn.Module, "str | None"], nn.Module]
"""A method's own model builder (``MethodSpec.model``): ``(cfg, backbone, name) -> model``."""


BackboneBuilder = Callable[[BackboneConfig], nn.Module]
"""A backbone builder: ``(cfg.model.backbone) -> module`` with an ``out_dim``."""

BACKBONE_OPTIONS = tuple(
    key for key in BackboneConfig.model_fields if key not in ("name", "weights")
)
"""The keys of ``model.backbone`` that configure the backbone its ``name`` chooses
(``weights``, which every backbone reads, is not one of them)."""

TORCHVISION_OPTIONS = ("in_channels", "image_size")
"""The options a ``tv:<name>`` or ``timm:<name>`` backbone reads."""


class BackboneRegistry(Registry[BackboneBuilder]):
    """The backbone builders by name; ``tv:<name>`` names any torchvision classifier,
    ``timm:<name>`` any timm model.

    ``get`` of an unknown name raises :class:`UnknownNameError` naming the close names
    (registered ones, or torchvision's after ``tv:``, which loads torchvision, or timm's
    after ``timm:``, which loads timm; a missing timm names the extra to install). The
    built-in builders of torchvision-based backbones import their module (and
    torchvision) when they build, so that a run of another backbone never loads it. A
    builder registered with the options it reads (``reads``, keys of ``model.backbone``)
    has every other option that a config sets refused at validation
    (:func:`check_backbone_options`).
    """

    def reads(self, name: str) -> tuple[str, ...] | None:
        """The options the backbone ``name`` reads, or None when its builder did not say."""
        if name.startswith((TV_PREFIX, TIMM_PREFIX)):
            return TORCHVISION_OPTIONS
        return super().reads(name)

    def readers(self, key: str) -> list[str]:
        """The backbones that read ``key``: registered names, then ``tv:<name>`` and
        ``timm:<name>``."""
        any_name = [f"{TV_PREFIX}<name>", f"{TIMM_PREFIX}<name>"]
        return super().readers(key) + (any_name if key in TORCHVISION_OPTIONS else [])

    def get(self, name: str) -> BackboneBuilder:
        """The builder of ``name``: registered, or ``tv:<torchvision model name>``."""
        if name.startswith(TV_PREFIX):
            from hookbus.parts.models.torchvision_any import check_torchvision_name

            try:
                check_torchvision_name(name.removeprefix(TV_PREFIX))
            except ValueError as exc:
                raise UnknownNameError(f"{exc}") from None
            return functools.partial(build_torchvision_backbone, name.removeprefix(TV_PREFIX))
        if name.startswith(TIMM_PREFIX):
            try:
                check_timm_name(name.removeprefix(TIMM_PREFIX))
            except ValueError as exc:
                raise UnknownNameError(f"{exc}") from None
            return functools.partial(build_timm_backbone, name.removeprefix(TIMM_PREFIX))
        try:
            return super().get(name)
        except UnknownNameError as exc:
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.6)
            hint = f"; close: {', '.join(close)}" if close else ""
            raise UnknownNameError(
                f"{exc}, or tv:<name> for a torchvision classification model, or timm:<name> "
                f"for a timm model{hint}"
            ) from None

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and name.startswith(TV_PREFIX):
            from hookbus.parts.models.torchvision_any import check_torchvision_name

            try:
                check_torchvision_name(name.removeprefix(TV_PREFIX))
            except ValueError:
                return False
            return True
        if isinstance(name, str) and name.startswith(TIMM_PREFIX):
            try:
                check_timm_name(name.removeprefix(TIMM_PREFIX))
            except ValueError:
                return False
            return True
        return super().__contains__(name)


BACKBONES = BackboneRegistry("backbone", readable=BACKBONE_OPTIONS)
"""Builders ``(cfg.model.backbone) -> backbone`` with an ``out_dim``, by ``backbone.name``."""

VIT_OPTIONS = ("in_channels", "image_size", "vit")
"""The options a ``vit_*`` backbone reads."""

RESNET_OPTIONS = ("in_channels", "small_stem", "zero_init_residual")
"""The options a ``resnet*`` backbone reads."""


def check_backbone_options(cfg: Config) -> None:
    """Raise a ConfigError naming the first key of ``model.backbone`` set to other than
    its default that the run's backbone does not read: an option of other backbones
    (``small_stem`` for ``small_cnn``, ``vit.*`` for ``resnet50``), or any option when
    the backbone comes from Python (``from_python.backbone``), whose module replaces the
    one ``model.backbone.name`` names (the name may stay: it tells the config checks
    which kind of backbone it is, a ViT for layer decay or MAE)."""
    backbone, python = cfg.model.backbone, cfg.from_python.backbone
    changed = [key for key in backbone.changed_keys() if key != "name"]
    if python is not None:
        if changed:
            raise ConfigError(
                f"model.backbone.{changed[0]}: the backbone comes from Python ({python}), "
                "which the options of model.backbone do not configure; remove it"
            )
        return
    read = BACKBONES.reads(backbone.name)
    if read is None:
        return
    for key in [key for key in changed if key != "weights"]:
        option = key.split(".")[0]
        if option not in read:
            raise ConfigError(
                f"model.backbone.{key}: backbone {backbone.name} does not read it (an option "
                f"of {', '.join(BACKBONES.readers(option))}); remove it"
            )


def build_torchvision_backbone(model: str, cfg: BackboneConfig) -> nn.Module:
    """torchvision's classification ``model`` (``tv:<model>``), see
    :func:`~hookbus.parts.models.torchvision_any.build_torchvision_model`."""
    from hookbus.parts.models.torchvision_any import build_torchvision_model

    return build_torchvision_model(model, in_channels=cfg.in_channels, image_size=cfg.image_size)


def build_timm_backbone(model: str, cfg: BackboneConfig) -> nn.Module:
    """timm's ``model`` (``timm:<model>``), see
    :func:`~hookbus.parts.models.timm_any.build_timm_model`."""
    return build_timm_model(model, in_channels=cfg.in_channels, image_size=cfg.image_size)


def _build_vit(name: str, cfg: BackboneConfig) -> ViTBackbone:
    from hookbus.parts.models.vit import ViTBackbone

    vit = cfg.vit
    sizes = vit_sizes(
        name,
        image_size=cfg.image_size,
        patch_size=vit.patch_size,
        width=vit.width,
        depth=vit.depth,
        heads=vit.heads,
        mlp_dim=vit.mlp_dim,
    )
    try:
        return ViTBackbone(
            sizes,
            in_channels=cfg.in_channels,
            freeze_patch_embedding=vit.freeze_patch_embedding,
            position_embedding=vit.position_embedding,
            patch_embedding_init=vit.patch_embedding_init,
            class_token_init=vit.class_token_init,
            drop_path=vit.drop_path,
            drop_path_rule=vit.drop_path_rule,
            layer_scale=vit.layer_scale,
            registers=vit.registers,
            class_token=vit.class_token,
            rope_base=vit.rope_base,
            rope_jitter=vit.rope_jitter,
            rope_rescale=vit.rope_rescale,
        )
    except ValueError as exc:
        raise ValueError(f"{name}: {exc} (model.backbone.vit, data.image_size)") from None


@BACKBONES.register("vit_tiny", VIT_OPTIONS)
def build_vit_tiny(cfg: BackboneConfig) -> ViTBackbone:
    """A digits-sized ViT: 16 px images in 4x4 patches, width 64, depth 4, 4 heads, MLP
    256 (each overridden by ``model.backbone.vit``); 64 features."""
    return _build_vit("vit_tiny", cfg)


@BACKBONES.register("vit_s16", VIT_OPTIONS)
def build_vit_s16(cfg: BackboneConfig) -> ViTBackbone:
    """ViT-S/16: 224 px in 16x16 patches, width 384, depth 12, 6 heads, MLP 1536."""
    return _build_vit("vit_s16", cfg)


@BACKBONES.register("vit_b16", VIT_OPTIONS)
def build_vit_b16(cfg: BackboneConfig) -> ViTBackbone:
    """ViT-B/16: 224 px in 16x16 patches, width 768, depth 12, 12 heads, MLP 3072."""
    return _build_vit("vit_b16", cfg)


def backbone_config(cfg: Config) -> BackboneConfig:
    """``cfg.model.backbone`` with ``image_size`` set (``data.image_size`` when None)."""
    backbone = cfg.model.backbone
    if backbone.image_size is None:
        backbone = backbone.model_copy(update={"image_size": cfg.data.image_size})
    return backbone


def zero_classifier_weights(
    backbone: BackboneConfig, weights: dict[str, Tensor], num_classes: int
) -> dict[str, Tensor]:
    """Zero weights of the classifier a ``vit_*``, ``tv:*`` or ``timm:*`` backbone was built
    without, keyed as in torchvision's or timm's model (``num_classes`` outputs); ``{}`` for
    the others."""
    if backbone.name in VIT_PRESETS:
        width = weights["class_token"].shape[-1]
        return {
            "heads.head.weight": weights["class_token"].new_zeros(num_classes, width),
            "heads.head.bias": weights["class_token"].new_zeros(num_classes),
        }
    if backbone.name.startswith(TV_PREFIX):
        from hookbus.parts.models.torchvision_any import zero_classifier

        return zero_classifier(backbone.name.removeprefix(TV_PREFIX), num_classes)
    if backbone.name.startswith(TIMM_PREFIX):
        return zero_timm_classifier(
            backbone.name.removeprefix(TIMM_PREFIX),
            num_classes,
            in_channels=backbone.in_channels,
            image_size=backbone.image_size,
        )
    return {}


@BACKBONES.register("small_cnn", ("width", "in_channels"))
def build_small_cnn(cfg: BackboneConfig) -> SmallCNN:
    """:class:`SmallCNN` with the config's input channels and width."""
    return SmallCNN(in_channels=cfg.in_channels, width=cfg.width)


def _build_resnet(name: str, cfg: BackboneConfig) -> nn.Module:
    from hookbus.parts.models.resnet import build_resnet

    return build_resnet(
        name,
        in_channels=cfg.in_channels,
        small_stem=cfg.small_stem,
        zero_init_residual=cfg.zero_init_residual,
    )


@BACKBONES.register("resnet18", RESNET_OPTIONS)
def build_resnet18(cfg: BackboneConfig) -> nn.Module:
    """torchvision's ResNet-18 trunk (512 features), see
    :func:`~hookbus.parts.models.resnet.build_resnet`."""
    return _build_resnet("resnet18", cfg)


@BACKBONES.register("resnet50", RESNET_OPTIONS)
def build_resnet50(cfg: BackboneConfig) -> nn.Module:
    """torchvision's ResNet-50 trunk (2048 features), see
    :func:`~hookbus.parts.models.resnet.build_resnet`."""
    return _build_resnet("resnet50", cfg)


def build_model(cfg: Config, backbone: nn.Module | None = None) -> nn.Module:
    """The model of ``cfg``: an :class:`SSLModel`, a :class:`LinearEvalModel` when
    ``model.linear_eval.enabled``, or a :class:`FineTuneModel` when
    ``model.fine_tune.enabled``, or the model the entry of ``loss.name`` builds with its
    own builder (``MethodSpec.model``: MAE's :class:`MaskedAutoencoder`, I-JEPA's
    :class:`~hookbus.parts.models.ijepa.JepaModel`, DINOv2's and iBOT's
    :class:`MaskedDistillationModel`).

    The SSL model is the backbone named by ``model.backbone.name``, an :class:`MLPHead`
    (``model.head``), and when configured a predictor MLP (``model.predictor``) and
    :class:`Prototypes` (``model.prototypes``). The linear-evaluation model loads its
    backbone from ``model.linear_eval.checkpoint`` when set, the fine-tuning model from
    ``model.fine_tune.checkpoint``. The backbone named starts from
    ``model.backbone.weights`` when set, in every method (before any momentum copy of it
    is made; a mismatch is a one-line :class:`~hookbus.engine.errors.CheckpointError`);
    a ``backbone`` given is used as it is. Raises
    ``ValueError`` when the sizes of consecutive
    parts do not match, or layer decay is asked of a backbone that is no ViT. A
    ``backbone`` given (with its ``out_dim``) replaces the one named.
    """
    model_cfg = cfg.model
    name = model_cfg.backbone.name if backbone is None else cfg.from_python.backbone
    if backbone is None:
        backbone = BACKBONES.get(model_cfg.backbone.name)(backbone_config(cfg))
        if model_cfg.backbone.weights is not None:
            try:
                load_backbone_weights(backbone, model_cfg.backbone.weights, name=str(name))
            except CheckpointError as exc:
                raise CheckpointError(f"model.backbone.weights: {exc}") from None
    if model_cfg.linear_eval.enabled:
        if model_cfg.linear_eval.checkpoint is not None:
            load_backbone_weights(backbone, model_cfg.linear_eval.checkpoint)
        return LinearEvalModel(
            backbone,
            model_cfg.linear_eval.num_classes,
            feature_norm=model_cfg.linear_eval.feature_norm,
        )
    if model_cfg.fine_tune.enabled:
        tune = model_cfg.fine_tune
        if tune.checkpoint is not None:
            load_backbone_weights(backbone, tune.checkpoint)
        try:
            return FineTuneModel(
                backbone,
                tune.num_classes,
                feature_norm=tune.feature_norm,
                backbone_lr_scale=tune.backbone_lr_scale,
                layer_decay=tune.layer_decay,
            )
        except ValueError as exc:
            raise ValueError(f"model.fine_tune ({name}): {exc}") from None
    spec = method_of(cfg.loss.name)
    if spec is not None and spec.model is not None:
        return method_model_builder(spec.model)(cfg, backbone, name)
    return SSLModel(backbone, *ssl_parts(cfg, backbone, name))


def method_model_builder(path: str) -> MethodModelBuilder:
    """The builder a method entry names as ``"package.module:function"``
    (``MethodSpec.model``), imported now."""
    module, _, function = path.partition(":")
    return cast(MethodModelBuilder, getattr(importlib.import_module(module), function))

"""Any timm model as a backbone: ``model.backbone.name: timm:<name>`` (the ``timm`` extra).

The model is built by ``timm.create_model(<name>, pretrained=False, num_classes=0)``:
random init, nothing downloaded, and no classifier, so that the backbone gives the
pooled features its classifier would read, ``[B, out_dim]`` (a ViT's class token after
the final norm, a CNN's global average pool). The module is timm's own, so its
``state_dict`` keys are timm's minus the classifier: ``hookbus export`` adds a zero
classifier back, and ``timm.create_model(<name>, checkpoint_path=<file>)`` loads the file
(with the run's ``in_chans`` and ``img_size`` where they are not the model's defaults).

A name with a pretrained tag (``vit_small_patch16_224.augreg_in21k``) starts from timm's
pretrained weights of that tag, from the local cache or downloaded
(:mod:`~hookbus.parts.models.timm_pretrained`: never a hang offline); hookbus downloads
only then. Weights from a local file load through ``model.backbone.weights`` (a state
dict keyed as timm's model, or a layout timm converts; its classifier is dropped).

timm's Vision Transformers (``timm.models.vision_transformer.VisionTransformer``) also
give their tokens to the methods that read them: :class:`TimmViTTokens`.
"""

from __future__ import annotations

import difflib
import functools
import sys
from types import ModuleType
from typing import Any, cast

import torch
from torch import Tensor, nn

from hookbus.engine.config.model_names import split_tag
from hookbus.engine.errors import ConfigError
from hookbus.parts.models.presets import TIMM_PREFIX
from hookbus.parts.models.timm_pretrained import create_pretrained

TIMM_EXTRA = "pip install 'hookbus[timm]'"
"""How to install timm for the ``timm:<name>`` backbones."""


def _timm() -> ModuleType:
    try:
        import timm
    except ImportError:
        raise ValueError(
            f"the {TIMM_PREFIX}<name> backbones need the timm package, which is not "
            f"installed: {TIMM_EXTRA}"
        ) from None
    return timm


@functools.cache
def timm_names() -> tuple[str, ...]:
    """The names of timm's models (``timm.list_models()``, without pretrained tags), sorted."""
    return tuple(sorted(_timm().list_models()))


@functools.cache
def timm_tagged_names() -> tuple[str, ...]:
    """The names of timm's pretrained weights, ``<model>.<tag>``
    (``timm.list_models(pretrained=True)``), sorted."""
    return tuple(sorted(_timm().list_models(pretrained=True)))


def check_timm_name(model: str) -> None:
    """Raise ValueError when timm is missing (naming the extra to install), or when timm
    has no model ``model`` or, for ``<model>.<tag>``, no pretrained weights of that tag
    (naming close names)."""
    names = timm_names()
    if model in names:
        return
    base, tag = split_tag(model)
    if tag and base in names:
        tagged = timm_tagged_names()
        if model in tagged:
            return
        tags = [name.partition(".")[2] for name in tagged if split_tag(name)[0] == base]
        known = f"its tags: {', '.join(tags)}" if tags else "it has none"
        raise ValueError(f"timm has no pretrained weights {tag!r} for {base} ({known})")
    close = difflib.get_close_matches(model, names, n=5, cutoff=0.6)
    hint = f"close names: {', '.join(TIMM_PREFIX + n for n in close)}" if close else "none close"
    raise ValueError(f"unknown timm model {model!r} ({hint}; all: timm.list_models())")


def _create(
    model: str,
    *,
    in_channels: int,
    image_size: int | None,
    pretrained: bool = False,
    **kwargs: object,
) -> nn.Module:
    # img_size sizes the position embedding of ViT-like models; the models that take
    # images of any size (CNNs) do not accept it.
    timm = _timm()

    def create(**options: object) -> nn.Module:
        if pretrained:
            return create_pretrained(timm, model, in_chans=in_channels, **options, **kwargs)
        return timm.create_model(model, pretrained=False, in_chans=in_channels, **options, **kwargs)

    # ViTs also take dynamic_img_size, so that views of other sizes (multi-crop's small
    # views) get the position embedding resized, as hookbus's own ViT does.
    tries: list[dict[str, object]] = [{}]
    if image_size is not None:
        tries[:0] = [{"img_size": image_size, "dynamic_img_size": True}, {"img_size": image_size}]
    for options in tries[:-1]:
        try:
            return create(**options)
        except TypeError as exc:
            if not any(key in str(exc) for key in options):
                raise
    return create(**tries[-1])


def classifier_prefix(net: nn.Module) -> str:
    """The dotted prefix of the classifier's keys in timm's model (``head.``, ``fc.``,
    ``head.fc.``...), from its ``pretrained_cfg``."""
    return f"{cast(Any, net).pretrained_cfg['classifier']}."


def _drop_classifier_keys(prefix: str, module, state_dict, own_prefix, *args) -> None:
    # An exported file carries a zero classifier for timm; the backbone has none.
    for key in [key for key in state_dict if key.startswith(own_prefix + prefix)]:
        del state_dict[key]


def build_timm_model(
    model: str, *, in_channels: int = 3, image_size: int | None = None
) -> nn.Module:
    """timm's model ``model`` as a backbone with an ``out_dim``.

    Random init, or timm's pretrained weights for a name with a tag (adapted by timm
    to ``in_channels`` and ``image_size``), no classifier (``num_classes=0``);
    ``in_channels`` is timm's
    ``in_chans``, and ``image_size`` its ``img_size`` for the models that take one (the
    ViTs' position embedding). ``out_dim`` is checked by a forward of one blank image of
    ``image_size`` (224 when None). Loading a state dict drops the classifier's keys, so
    that an exported file loads back. Raises ValueError for a missing timm, an unknown
    or tagged name (:func:`check_timm_name`), or a model that cannot take images of that
    size.
    """
    check_timm_name(model)
    where = f"{TIMM_PREFIX}{model}"
    side = image_size or 224
    try:
        net = _create(
            model,
            in_channels=in_channels,
            image_size=image_size,
            pretrained=bool(split_tag(model)[1]),
            num_classes=0,
        )
    except ConfigError:
        raise
    except (RuntimeError, ValueError, AssertionError, TypeError) as exc:
        raise ValueError(f"{where}: timm cannot build it: {str(exc).splitlines()[0]}") from None
    net.register_load_state_dict_pre_hook(
        functools.partial(_drop_classifier_keys, classifier_prefix(net))
    )
    net.eval()
    try:
        with torch.no_grad():
            features = net(torch.zeros(1, in_channels, side, side))
    except (RuntimeError, ValueError, AssertionError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{where} cannot encode {side}x{side} images: {problem}") from None
    finally:
        net.train()
    if not isinstance(features, Tensor) or features.dim() != 2:
        shape = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
        raise ValueError(f"{where}: without its classifier it gives {shape}, not features [B, D]")
    cast(Any, net).out_dim = features.shape[1]  # a timm model takes new attributes
    return net


def zero_timm_classifier(
    model: str, num_classes: int, *, in_channels: int = 3, image_size: int | None = None
) -> dict[str, Tensor]:
    """Zero weights for the classifier that :func:`build_timm_model` leaves out, keyed
    and shaped as in ``timm.create_model(model, num_classes=num_classes)``."""
    with torch.device("meta"):
        net = _create(
            model, in_channels=in_channels, image_size=image_size, num_classes=num_classes
        )
    prefix = classifier_prefix(net)
    return {
        key: torch.zeros(value.shape, dtype=value.dtype)
        for key, value in net.state_dict().items()
        if key.startswith(prefix)
    }


def is_timm_vit(net: nn.Module) -> bool:
    """Whether ``net`` is timm's ``VisionTransformer``. timm is never imported here: a
    model built by timm has its module loaded already, so when it is not, ``net`` is not
    one (importing timm to find that out costs seconds, most of ``hookbus eval``'s time
    outside feature extraction on a thousand photos)."""
    module = sys.modules.get("timm.models.vision_transformer")
    return module is not None and isinstance(net, module.VisionTransformer)


class TimmViTTokens:
    """The tokens of timm's ``VisionTransformer`` ``net`` after its final norm.

    ``net`` keeps its prefix tokens (class token, registers: ``num_prefix_tokens``) in
    every forward; they attend and are attended to, and are left out of what
    :meth:`patch_tokens` returns.
    """

    def __init__(self, net: nn.Module) -> None:
        # timm's VisionTransformer: its attributes are not typed on nn.Module.
        self.net: Any = cast(Any, net)
        patch = self.net.patch_embed.patch_size
        self.patch_size = patch[0] if isinstance(patch, tuple) else patch

    def patch_tokens(self, images: Tensor, keep: Tensor | None = None) -> Tensor:
        """The patch tokens ``[B, N, width]`` of ``images`` (row by row), or with ``keep``
        ``[B, K]`` the tokens of those patches only, encoded without the others:
        ``[B, K, width]``. With every index, in order, both are the same."""
        return self._encode(images, keep)[:, self.net.num_prefix_tokens :]

    def visible_tokens(self, images: Tensor, keep: Tensor) -> Tensor:
        """The class token and the tokens of the ``keep`` ``[B, K]`` patches of ``images``,
        encoded without the others: ``[B, 1 + K, width]``, the contract of
        :meth:`~hookbus.parts.models.vit.ViTBackbone.visible_tokens` (MAE's encoder). The
        registers attend and are left out; a model without a class token puts the mean
        of the kept patches' tokens first."""
        x = self._encode(images, keep)
        patches = x[:, self.net.num_prefix_tokens :]
        if getattr(self.net, "cls_token", None) is not None:
            return torch.cat([x[:, :1], patches], dim=1)
        return torch.cat([patches.mean(dim=1, keepdim=True), patches], dim=1)

    def _encode(self, images: Tensor, keep: Tensor | None) -> Tensor:
        """Every token after the final norm, the prefix tokens first, of all patches or
        of the ``keep`` ones: timm's ``forward_features`` (a method a sharded backbone
        gathers its parameters for), with the kept tokens gathered after ``norm_pre``
        (a per-token norm, so as before it) by a forward hook there for the call only."""
        net = self.net
        if keep is None:
            return net.forward_features(images)
        prefix = net.num_prefix_tokens

        def kept(module: nn.Module, args: Any, x: Tensor) -> Tensor:
            patches = torch.gather(x[:, prefix:], 1, keep.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
            return torch.cat([x[:, :prefix], patches], dim=1)

        handle = net.norm_pre.register_forward_hook(kept)
        try:
            return net.forward_features(images)
        finally:
            handle.remove()


def timm_patch_size(model: str) -> int:
    """The patch side of timm's ViT ``model`` (built on the meta device, no weights);
    ``ValueError`` when ``model`` is no timm ``VisionTransformer``."""
    check_timm_name(model)
    net = timm_meta_model(model)
    if not is_timm_vit(net):
        raise ValueError(
            f"{TIMM_PREFIX}{model} is a {type(net).__name__}, not timm's VisionTransformer, "
            "whose patch tokens the method reads"
        )
    return TimmViTTokens(net).patch_size


def timm_meta_model(model: str) -> nn.Module:
    """timm's model ``model`` (a known name) built on the meta device: its classes and
    sizes without weights or a download."""
    with torch.device("meta"):
        return _timm().create_model(model, pretrained=False, num_classes=0)

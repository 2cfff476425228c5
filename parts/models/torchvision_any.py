"""Any torchvision classification model as a backbone: ``model.backbone.name: tv:<name>``.

The model is built by ``torchvision.models.get_model(<name>, weights=None)`` (random
init, nothing downloaded); its last ``nn.Linear`` (the classifier: ``fc``,
``classifier.<i>``, ``heads.head``, ``head``, ...) is replaced by the identity, so that
the backbone gives the features that classifier read, ``[B, out_dim]``.
"""

from __future__ import annotations

import difflib
import functools
from typing import cast

import torch
import torchvision
from torch import Tensor, nn

from hookbus.parts.models.presets import TV_PREFIX


@functools.cache
def torchvision_names() -> tuple[str, ...]:
    """The names of torchvision's classification models (``list_models``), sorted."""
    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)))


def check_torchvision_name(model: str) -> None:
    """Raise ValueError, naming close names, when ``model`` is no torchvision classifier."""
    names = torchvision_names()
    if model in names:
        return
    close = difflib.get_close_matches(model, names, n=5, cutoff=0.6)
    hint = f"close names: {', '.join(TV_PREFIX + n for n in close)}" if close else "none close"
    raise ValueError(
        f"unknown torchvision model {model!r} ({hint}; all: "
        "torchvision.models.list_models(module=torchvision.models))"
    )


def last_linear(net: nn.Module) -> tuple[str, nn.Linear]:
    """The dotted name and the module of the last ``nn.Linear`` registered in ``net``."""
    linears = [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("it has no nn.Linear classifier to remove")
    return linears[-1]


def _drop_auxiliary_classifiers(net: nn.Module) -> None:
    # GoogLeNet and Inception v3 add auxiliary logits in training: not a backbone's job.
    if getattr(net, "aux_logits", False):
        net.aux_logits = False  # type: ignore[assignment]  # a bool flag, not a submodule
        for attribute in ("AuxLogits", "aux1", "aux2"):
            if hasattr(net, attribute):
                setattr(net, attribute, None)


def _adapt_first_conv(net: nn.Module, in_channels: int) -> None:
    # The first convolution reading the 3 RGB channels is rebuilt for in_channels.
    for name, conv in net.named_modules():
        if isinstance(conv, nn.Conv2d) and conv.in_channels == 3 and conv.groups == 1:
            parent_name, _, attribute = name.rpartition(".")
            parent = net.get_submodule(parent_name)
            # A Conv2d keeps kernel_size, stride, padding and dilation as pairs.
            pair = tuple[int, int]
            new = nn.Conv2d(
                in_channels,
                conv.out_channels,
                kernel_size=cast(pair, conv.kernel_size),
                stride=cast(pair, conv.stride),
                padding=cast("str | tuple[int, int]", conv.padding),
                dilation=cast(pair, conv.dilation),
                bias=conv.bias is not None,
                padding_mode=conv.padding_mode,
            )
            setattr(parent, attribute, new)
            return
    raise ValueError(f"no first convolution on 3 channels found to change to {in_channels}")


def _drop_classifier_keys(keys: tuple[str, ...], module, state_dict, prefix, *args) -> None:
    # An exported file carries a zero classifier for torchvision; the backbone has none.
    for key in keys:
        state_dict.pop(prefix + key, None)


def build_torchvision_model(
    model: str, *, in_channels: int = 3, image_size: int | None = None
) -> nn.Module:
    """torchvision's classification model ``model`` as a backbone with an ``out_dim``.

    Random init (``weights=None``); the last ``nn.Linear`` becomes ``nn.Identity()``
    (``out_dim`` is its ``in_features``, checked by a forward of one blank image of
    ``image_size``, 224 when None); auxiliary classifiers are dropped. ``in_channels``
    other than 3 rebuilds the first convolution on 3 channels. Loading a state dict
    drops the removed classifier's keys, so that an exported file loads back. Raises
    ValueError for an unknown name (listing close ones), a model without a Linear
    classifier, or one that cannot take images of that size.
    """
    check_torchvision_name(model)
    net = torchvision.models.get_model(model, weights=None)
    where = f"{TV_PREFIX}{model}"
    try:
        _drop_auxiliary_classifiers(net)
        path, linear = last_linear(net)
        if in_channels != 3:
            _adapt_first_conv(net, in_channels)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    parent_name, _, attribute = path.rpartition(".")
    setattr(net.get_submodule(parent_name), attribute, nn.Identity())
    net.out_dim = linear.in_features
    net.classifier_path = path
    keys = (f"{path}.weight",) + ((f"{path}.bias",) if linear.bias is not None else ())
    net.register_load_state_dict_pre_hook(functools.partial(_drop_classifier_keys, keys))
    side = image_size or 224
    net.eval()
    try:
        with torch.no_grad():
            features = net(torch.zeros(1, in_channels, side, side))
    except (RuntimeError, ValueError, AssertionError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{where} cannot encode {side}x{side} images: {problem}") from None
    finally:
        net.train()
    if not isinstance(features, Tensor) or features.shape != (1, net.out_dim):
        shape = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
        raise ValueError(
            f"{where}: without its last Linear layer ({path}) it gives {shape}, "
            f"not features [B, {net.out_dim}]"
        )
    return net


def zero_classifier(model: str, num_classes: int) -> dict[str, Tensor]:
    """Zero weights for the classifier that :func:`build_torchvision_model` removes,
    keyed as in torchvision's ``model`` (``num_classes`` outputs)."""
    net = torchvision.models.get_model(model, weights=None)
    _drop_auxiliary_classifiers(net)
    path, linear = last_linear(net)
    out = {f"{path}.weight": torch.zeros(num_classes, linear.in_features)}
    if linear.bias is not None:
        out[f"{path}.bias"] = torch.zeros(num_classes)
    return out

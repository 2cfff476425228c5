"""How a backbone may be named: the spellings users type, and the one hookbus keeps.

``model.backbone.name`` (and ``hookbus train --model``) takes hookbus's own backbones by
name (``vit_tiny``, ``resnet18``, ``small_cnn``...), any torchvision classification model
and any timm model. A torchvision model may be spelled ``tv:NAME``, ``tv/NAME``,
``torchvision:NAME`` or ``torchvision/NAME``; a timm model ``timm:NAME`` or ``timm/NAME``
(as the Hugging Face hub writes timm's models), with or without a pretrained tag
(``timm:vit_small_patch14_reg4_dinov2.lvd142m``). The config keeps one spelling,
``tv:NAME`` or ``timm:NAME``, so the effective config and the run directory's
``config.yaml`` read the same whichever was typed.

This module imports neither torch nor the model libraries: the config reads it.
"""

from __future__ import annotations

TV_PREFIX = "tv:"
"""Prefix of a backbone name that names a torchvision classification model."""

TIMM_PREFIX = "timm:"
"""Prefix of a backbone name that names a timm model (the ``timm`` extra)."""

SPELLINGS = {
    "tv/": TV_PREFIX,
    "torchvision:": TV_PREFIX,
    "torchvision/": TV_PREFIX,
    "timm/": TIMM_PREFIX,
}
"""The other spellings of the two prefixes, and the one each stands for."""


def canonical_backbone_name(name: str) -> str:
    """``name`` with its library prefix spelled as hookbus keeps it: ``timm/NAME`` is
    ``timm:NAME``, ``torchvision/NAME`` (or ``torchvision:``, ``tv/``) is ``tv:NAME``;
    any other name is returned as it is."""
    for spelling, prefix in SPELLINGS.items():
        if name.startswith(spelling):
            return prefix + name.removeprefix(spelling)
    return name


def split_tag(model: str) -> tuple[str, str]:
    """A timm model name split at its pretrained tag: ``("vit_small_patch14_dinov2",
    "lvd142m")``; ``(model, "")`` without one."""
    base, _, tag = model.partition(".")
    return base, tag

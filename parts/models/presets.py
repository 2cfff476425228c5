"""What the torchvision-based backbones are called and how large they are, without
torchvision: the config checks, the registry and the export read these, and only the
builders of those backbones import torchvision (about a second), so a run of another
backbone never loads it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hookbus.engine.config.model_names import TIMM_PREFIX, TV_PREFIX

__all__ = ["RESNET_NAMES", "TIMM_PREFIX", "TV_PREFIX", "VIT_PRESETS", "ViTSizes", "vit_sizes"]

RESNET_NAMES = ("resnet18", "resnet50")
"""The ResNet backbones (torchvision's ResNet trunks)."""


@dataclass(frozen=True)
class ViTSizes:
    """The sizes of a ViT: image side, patch side, width, depth, heads and MLP size."""

    image_size: int
    patch_size: int
    width: int
    depth: int
    heads: int
    mlp_dim: int


VIT_PRESETS = {
    # Digits-sized: 16x16 images in 4x4 patches (16 tokens + the class token).
    "vit_tiny": ViTSizes(image_size=16, patch_size=4, width=64, depth=4, heads=4, mlp_dim=256),
    "vit_s16": ViTSizes(image_size=224, patch_size=16, width=384, depth=12, heads=6, mlp_dim=1536),
    "vit_b16": ViTSizes(image_size=224, patch_size=16, width=768, depth=12, heads=12, mlp_dim=3072),
}
"""The sizes of the registered ViT backbones, by backbone name."""


def vit_sizes(
    name: str,
    *,
    image_size: int | None = None,
    patch_size: int | None = None,
    width: int | None = None,
    depth: int | None = None,
    heads: int | None = None,
    mlp_dim: int | None = None,
) -> ViTSizes:
    """The sizes of the preset ``name`` with those given (not None) replacing its own."""
    if name not in VIT_PRESETS:
        raise ValueError(f"unknown ViT {name!r}; known: {', '.join(sorted(VIT_PRESETS))}")
    given = {
        "image_size": image_size,
        "patch_size": patch_size,
        "width": width,
        "depth": depth,
        "heads": heads,
        "mlp_dim": mlp_dim,
    }
    return replace(VIT_PRESETS[name], **{k: v for k, v in given.items() if v is not None})

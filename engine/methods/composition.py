"""What a composed config is built for: the backbone, the images and the machine.

``hookbus train --method M --model X --data DIR`` (and ``hookbus.train``) compose a
config from three choices. The runner works out a :class:`Setting` from them (the
backbone's kind and sizes, the image side, how many train images there are, whether the
machine is a laptop, the batch it proposes) and hands it to the method's entry
(``MethodSpec.compose``), which returns its part of the recipe as a nested mapping: its
heads, prototypes, views, temperatures and momentum, each following from the setting.
The runner adds the data, the length and the schedule around it.

This module is torch-free data and arithmetic, so the method entries can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """The backbone, data and machine a method's settings follow from.

    ``backbone`` is ``model.backbone.name``; ``patch_tokens`` says the backbone is one of
    hookbus's ViTs (``vit_*``), whose patch tokens the masked methods read; ``timm_vit``
    a timm Vision Transformer; ``width`` its feature size when known without building it
    (None: the head's input follows the backbone, ``dims: [backbone, ...]``);
    ``patch_size`` a ViT's patch side in pixels at this image size. ``image_size`` is the
    side of the large views, ``channels`` the images' channels, ``images`` the train
    images, ``batch_size`` the batch the runner proposes for them, ``laptop`` a machine
    without CUDA, ``tensors`` data held in memory as tensors (``data.pipeline: batch``,
    augmented by ``data.augment``; image files: ``data.torchvision``), ``steps`` the
    train steps of the whole run at that batch (the epochs the runner composes, or the
    user's ``optimizer.num_epochs``; 0 when unknown).
    """

    backbone: str
    patch_tokens: bool
    timm_vit: bool
    width: int | None
    patch_size: int | None
    image_size: int
    channels: int
    images: int
    batch_size: int
    laptop: bool
    tensors: bool = False
    steps: int = 0

    @property
    def vit(self) -> bool:
        """Any Vision Transformer (hookbus's, timm's or torchvision's)."""
        return self.patch_size is not None

    @property
    def small_view_size(self) -> int:
        """The side of multi-crop's small views: three quarters of tiny images (up to 32
        pixels), half of larger ones; for a ViT a whole number of patches, two at least."""
        side = self.image_size * 3 // 4 if self.image_size <= 32 else self.image_size // 2
        if self.patch_size:
            side = max(2 * self.patch_size, side // self.patch_size * self.patch_size)
        return side

    @property
    def head_hidden(self) -> int:
        """The hidden width of a projection head: 512, or 256 after a backbone of 64
        features or fewer (the tiny ViT's)."""
        return 256 if self.width is not None and self.width <= 64 else 512

    @property
    def patches(self) -> int:
        """Patches per image of a ViT (0 for a CNN)."""
        return (self.image_size // self.patch_size) ** 2 if self.patch_size else 0

    @property
    def large_data(self) -> bool:
        """More than 50,000 train images: the papers' regime (slower EMAs, more prototypes)."""
        return self.images > 50_000

    def needs_patch_tokens(self, method: str, *, timm_vit: bool = False) -> None:
        """Raise ValueError when the backbone gives no patch tokens that ``method`` can
        mask: one of hookbus's ViTs, or (``timm_vit``) also a timm ViT."""
        if self.patch_tokens or (timm_vit and self.timm_vit):
            return
        kinds = "hookbus's or timm's Vision Transformers" if timm_vit else "hookbus's ViTs"
        also = ", or a timm ViT such as timm:vit_tiny_patch16_224" if timm_vit else ""
        raise ValueError(
            f"method {method} masks the patch tokens of {kinds}, and model {self.backbone} "
            f"is not one: pick --model vit_tiny (or vit_s16, vit_b16{also})"
        )


def power_of_two_below(value: float) -> int:
    """The largest power of two at most ``value`` (1 for anything below 2)."""
    power = 1
    while power * 2 <= value:
        power *= 2
    return power


def clamp(value: int, low: int, high: int) -> int:
    """``value`` brought into ``[low, high]``."""
    return max(low, min(high, value))


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, section by section (a new mapping)."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def multi_crop(setting: Setting, count: int) -> dict[str, Any]:
    """The ``data.small_views`` of a multi-crop method: ``count`` small views of
    :attr:`Setting.small_view_size`, cut from a quarter to 60% of tiny images (the
    digits' measured range) and from 10% to 40% of larger ones. None for a ViT of
    timm's or torchvision's, which takes images of the size it was built for only."""
    if setting.vit and not setting.patch_tokens:
        return {"count": 0}
    area = [0.25, 0.6] if setting.image_size <= 32 else [0.1, 0.4]
    return {"count": count, "size": setting.small_view_size, "crop_area": area}


def crop_only(setting: Setting, area: tuple[float, float]) -> dict[str, Any]:
    """The ``data`` keys that leave a view a random crop of ``area`` and nothing more (no
    colour, noise, rotation or erasing), for the methods that predict what they see:
    ``data.augment`` for tensors in memory (``setting.tensors``), ``data.torchvision``
    for image files."""
    if setting.tensors:
        return {
            "augment": {
                "crop_area": list(area),
                "shift": 0.0,
                "rotation": 0.0,
                "contrast": [1.0, 1.0],
                "brightness": 0.0,
                "noise_std": 0.0,
                "erase_prob": 0.0,
            }
        }
    return {
        "torchvision": {
            "crop_scale": list(area),
            "color_jitter_prob": 0.0,
            "grayscale_prob": 0.0,
            "blur_prob": 0.0,
            "solarize_prob": 0.0,
        }
    }


def ema_momentum(setting: Setting) -> float:
    """A teacher's first EMA momentum: 0.99 on small data (few hundred steps), the
    papers' 0.996 on large data."""
    return 0.996 if setting.large_data else 0.99

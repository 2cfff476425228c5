"""The image pipelines hookbus's is measured against, on the same files and settings.

* lightly's ``SimCLRTransform`` (``pip install lightly``; the ``bench`` extra), its
  parameters set to the recipe's;
* a torchvision v1 pipeline on PIL images, as solo-learn and the methods' reference
  code build one: ``RandomResizedCrop``, ``RandomHorizontalFlip``, ``ColorJitter``,
  ``RandomGrayscale``, a PIL Gaussian blur, solarization, ``ToTensor``, ``Normalize``.

Each reads a file with Pillow, makes the recipe's views of it and is batched by the
DataLoader's default collate function.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageFilter, ImageOps
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from hookbus.config import Config


class PeerFolder(Dataset):
    """Item ``i``: the views ``transform`` makes of file ``i`` (read with Pillow, RGB),
    a label 0 and ``i``."""

    def __init__(self, files: list[Path], transform: Callable[[Image.Image], Any]) -> None:
        self.files = files
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, int, int]:
        with Image.open(self.files[index]) as image:
            return self.transform(image.convert("RGB")), 0, index


def lightly_transform(cfg: Config) -> Callable[[Image.Image], list[Tensor]] | None:
    """lightly's ``SimCLRTransform`` with ``cfg.data``'s settings, or None when lightly
    is not installed."""
    try:
        from lightly.transforms import SimCLRTransform
    except ImportError:
        return None
    data = cfg.data
    augment = data.torchvision
    brightness, contrast, saturation, hue = augment.color_jitter
    return SimCLRTransform(
        input_size=data.image_size,
        cj_prob=augment.color_jitter_prob,
        cj_bright=brightness,
        cj_contrast=contrast,
        cj_sat=saturation,
        cj_hue=hue,
        min_scale=augment.crop_scale[0],
        random_gray_scale=augment.grayscale_prob,
        gaussian_blur=augment.blur_prob,
        sigmas=augment.blur_sigma,
        hf_prob=augment.flip_prob,
        normalize={"mean": list(augment.mean), "std": list(augment.std)},
    )


class PILGaussianBlur:
    """PIL's Gaussian blur with a standard deviation uniform in ``sigma``."""

    def __init__(self, sigma: tuple[float, float]) -> None:
        self.sigma = sigma

    def __call__(self, image: Image.Image) -> Image.Image:
        return image.filter(ImageFilter.GaussianBlur(radius=random.uniform(*self.sigma)))


class PILSolarize:
    """Pillow's solarization at 128."""

    def __call__(self, image: Image.Image) -> Image.Image:
        return ImageOps.solarize(image, threshold=128)


def torchvision_v1_transform(cfg: Config) -> Callable[[Image.Image], list[Tensor]]:
    """``data.num_views`` views by torchvision v1 transforms on PIL images with
    ``cfg.data``'s settings."""
    data = cfg.data
    augment = data.torchvision
    view = transforms.Compose(
        [
            transforms.RandomResizedCrop(data.image_size, scale=augment.crop_scale),
            transforms.RandomApply(
                [transforms.ColorJitter(*augment.color_jitter)], p=augment.color_jitter_prob
            ),
            transforms.RandomGrayscale(augment.grayscale_prob),
            transforms.RandomApply([PILGaussianBlur(augment.blur_sigma)], p=augment.blur_prob),
            transforms.RandomApply([PILSolarize()], p=augment.solarize_prob),
            transforms.RandomHorizontalFlip(augment.flip_prob),
            transforms.ToTensor(),
            transforms.Normalize(augment.mean, augment.std),
        ]
    )
    return lambda image: [view(image) for _ in range(data.num_views)]


def peer_loader(
    files: list[Path], transform: Callable[[Image.Image], Any], batch_size: int, workers: int
) -> DataLoader:
    """A DataLoader over ``files`` with ``transform``, shuffled, persistent workers."""
    return DataLoader(
        PeerFolder(files, transform),
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(0),
    )

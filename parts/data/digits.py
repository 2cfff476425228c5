"""The scikit-learn digits images, split, upsampled and normalised as tensors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

DIGITS_MAX_VALUE = 16.0
"""Pixels of the scikit-learn digits are integers in [0, 16]."""


@dataclass(frozen=True)
class ImageSplit:
    """Train and test images ``[N, C, S, S]`` (float32) with their labels ``[N]`` (int64)."""

    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor


def _upsample(images: np.ndarray, image_size: int) -> Tensor:
    """``[N, 8, 8]`` array -> bilinearly resized ``[N, 1, S, S]`` float32 tensor."""
    tensor = torch.from_numpy(images.astype(np.float32)).unsqueeze(1)
    return F.interpolate(
        tensor, size=(image_size, image_size), mode="bilinear", align_corners=False
    )


def load_digits_split(image_size: int = 16, test_size: int = 500, seed: int = 0) -> ImageSplit:
    """The 1797 digits, stratified into train and ``test_size`` test images.

    Pixels are scaled to [0, 1], upsampled from 8x8 to ``image_size`` (bilinear,
    ``align_corners=False``), then both splits are normalised with the train split's
    scalar mean and standard deviation.
    """
    # scikit-learn takes about 2 s to import: only runs that read the digits pay for it
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images / DIGITS_MAX_VALUE
    labels = digits.target.astype(np.int64)
    train_x, test_x, train_y, test_y = train_test_split(
        images, labels, test_size=test_size, random_state=seed, stratify=labels
    )
    train_images = _upsample(train_x, image_size)
    test_images = _upsample(test_x, image_size)
    mean, std = train_images.mean(), train_images.std()
    return ImageSplit(
        train_images=(train_images - mean) / std,
        train_labels=torch.from_numpy(train_y),
        test_images=(test_images - mean) / std,
        test_labels=torch.from_numpy(test_y),
    )

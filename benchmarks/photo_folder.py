"""A generated folder of photo-like JPEG files for the image-pipeline benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw

PHOTO_SIZE = (500, 375)
"""Width and height of the generated photos: a common ImageNet size."""

OCTAVES = ((4, 1.0), (8, 0.5), (16, 0.3), (32, 0.2), (64, 0.15), (128, 0.12))
"""(cells across, amplitude) of the smooth noise layers: coarse shapes to fine detail."""


def photo(seed: int, size: tuple[int, int] = PHOTO_SIZE) -> Image.Image:
    """One photo-like RGB image: smooth multi-scale color noise, a few flat shapes with
    sharp edges, then grain, so that it compresses as a photo does (about 60 KB as a
    500x375 JPEG at quality 90, where a flat image takes a few KB)."""
    width, height = size
    generator = torch.Generator().manual_seed(seed)
    layers = torch.zeros(1, 3, height, width)
    for cells, amplitude in OCTAVES:
        coarse = torch.rand(1, 3, max(2, cells * height // width), cells, generator=generator)
        layers += amplitude * F.interpolate(coarse - 0.5, size=(height, width), mode="bicubic")
    pixels = (layers[0] * 0.5 + 0.5).clamp(0, 1).permute(1, 2, 0).mul(255).to(torch.uint8)
    image = Image.fromarray(pixels.numpy())
    draw = ImageDraw.Draw(image)
    rng = np.random.default_rng(seed)
    for _ in range(8):
        left, top = int(rng.integers(0, width)), int(rng.integers(0, height))
        box = [left, top, left + int(rng.integers(10, 200)), top + int(rng.integers(10, 150))]
        color = tuple(int(value) for value in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=color)
    shaded = torch.from_numpy(np.array(image)).float() / 255
    grain = torch.rand(1, 1, height // 2, width // 2, generator=generator) - 0.5
    grain = F.interpolate(grain, size=(height, width), mode="bilinear")[0, 0, :, :, None]
    noise = torch.rand(height, width, 3, generator=generator) - 0.5
    shaded = (shaded + 0.18 * grain + 0.05 * noise).clamp(0, 1)
    return Image.fromarray(shaded.mul(255).to(torch.uint8).numpy())


def write_photo_folder(root: Path, count: int, size: tuple[int, int] = PHOTO_SIZE) -> Path:
    """``count`` photos (:func:`photo`, seeds 0, 1, ...) as JPEG files (quality 90) in
    two class folders under ``root``; returns ``root``."""
    for index in range(count):
        folder = root / f"class{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(index, size).save(folder / f"{index:05d}.jpg", quality=90)
    return root

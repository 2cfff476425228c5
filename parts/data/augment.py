"""Random augmentations of a whole batch at once, one set of parameters per image."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.engine.config import AugmentConfig

ERASE_ASPECT = (0.3, 3.3)
"""Aspect-ratio range (width / height) of the erased rectangle, as torchvision's default."""

_GEOMETRIC = slice(0, 7)
_PHOTOMETRIC = slice(7, 9)
_ERASE = slice(9, 14)
_NUM_PARAMS = 14


def _between(u: Tensor, low: float, high: float) -> Tensor:
    """Map uniform draws in [0, 1) to [low, high)."""
    return low + (high - low) * u


def _log_uniform(u: Tensor, low: float, high: float) -> Tensor:
    """Map uniform draws in [0, 1) to a log-uniform value in [low, high)."""
    return torch.exp(_between(u, math.log(low), math.log(high)))


def _symmetric(u: Tensor, bound: float) -> Tensor:
    """Map uniform draws in [0, 1) to [-bound, bound)."""
    return (2 * u - 1) * bound


class BatchAugment:
    """Augment a batch ``[B, C, H, W]`` with per-image parameters, without a Python loop.

    All random parameters of the batch come from one draw of ``generator`` (plus one
    draw of the noise), so the result is a function of the images and the generator's
    state. The steps, in order:

    1. one affine map per image, sampled with ``F.affine_grid`` + ``F.grid_sample``
       (bilinear): a random resized crop (area fraction in ``crop_area``, aspect ratio
       log-uniform in ``crop_aspect``, placed inside the image), rotated by up to
       ``rotation`` degrees about its centre and translated by up to ``shift`` of the
       image side. Pixels sampled from outside the image take the image's minimum,
       its background for dark-background images such as the digits: a zero would
       be a grey frame after normalisation and "border" would smear strokes that
       touch the edge, both cues unrelated to the digit;
    2. contrast: scale by a factor in ``contrast`` around the per-image mean;
    3. brightness: add a value in ``[-brightness, brightness]``;
    4. Gaussian noise of standard deviation ``noise_std``;
    5. random erasing: with probability ``erase_prob`` set a rectangle covering an
       ``erase_area`` fraction of the image (aspect ratio log-uniform in
       :data:`ERASE_ASPECT`) to 0.

    No flips: a mirrored digit is another symbol.
    """

    def __init__(self, cfg: AugmentConfig) -> None:
        self.cfg = cfg

    def __call__(
        self, images: Tensor, generator: torch.Generator, size: int | None = None
    ) -> Tensor:
        """One augmented view of ``images``, drawing its randomness from ``generator``.

        The view is ``size`` x ``size`` pixels (the input's size when None): the crop is
        resampled to that size, which makes the small views of multi-crop.
        """
        batch, channels, height, width = images.shape
        out_shape = (
            (batch, channels, height, width) if size is None else (batch, channels, size, size)
        )
        params = torch.rand(len(images), _NUM_PARAMS, generator=generator, device=generator.device)
        noise = torch.randn(out_shape, generator=generator, device=generator.device)
        params = params.to(images.device, images.dtype)
        noise = noise.to(images.device, images.dtype)
        out = self._warp(images, params[:, _GEOMETRIC], out_shape)
        out = self._photometric(out, params[:, _PHOTOMETRIC], noise)
        return self._erase(out, params[:, _ERASE])

    def _affine_matrices(self, u: Tensor) -> Tensor:
        """``[B, 2, 3]`` maps from output to input coordinates (both in [-1, 1])."""
        cfg = self.cfg
        area = _between(u[:, 0], *cfg.crop_area)
        aspect = _log_uniform(u[:, 1], *cfg.crop_aspect)
        width = torch.sqrt(area * aspect).clamp(max=1.0)
        height = torch.sqrt(area / aspect).clamp(max=1.0)
        centre_x = _symmetric(u[:, 2], 1.0) * (1 - width)
        centre_y = _symmetric(u[:, 3], 1.0) * (1 - height)
        shift_x = _symmetric(u[:, 4], 2 * cfg.shift)
        shift_y = _symmetric(u[:, 5], 2 * cfg.shift)
        angle = torch.deg2rad(_symmetric(u[:, 6], cfg.rotation))
        cos, sin = torch.cos(angle), torch.sin(angle)
        row_x = torch.stack([cos * width, -sin * height, centre_x + shift_x], dim=1)
        row_y = torch.stack([sin * width, cos * height, centre_y + shift_y], dim=1)
        return torch.stack([row_x, row_y], dim=1)

    def _warp(self, images: Tensor, u: Tensor, out_shape: tuple[int, ...]) -> Tensor:
        """Crop, rotate and shift every image into ``out_shape``, filling the outside with
        the image's minimum."""
        grid = F.affine_grid(self._affine_matrices(u), list(out_shape), align_corners=False)
        background = images.amin(dim=(1, 2, 3), keepdim=True)
        warped = F.grid_sample(
            images - background, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )
        return warped + background

    def _photometric(self, images: Tensor, u: Tensor, noise: Tensor) -> Tensor:
        """Contrast around the per-image mean, brightness shift, then Gaussian noise."""
        cfg = self.cfg
        contrast = _between(u[:, 0], *cfg.contrast).view(-1, 1, 1, 1)
        brightness = _symmetric(u[:, 1], cfg.brightness).view(-1, 1, 1, 1)
        mean = images.mean(dim=(1, 2, 3), keepdim=True)
        return mean + contrast * (images - mean) + brightness + cfg.noise_std * noise

    def _erase(self, images: Tensor, u: Tensor) -> Tensor:
        """Zero a random rectangle in each image picked with probability ``erase_prob``."""
        cfg = self.cfg
        _, _, height_px, width_px = images.shape
        chosen = u[:, 0] < cfg.erase_prob
        area = _between(u[:, 1], *cfg.erase_area)
        aspect = _log_uniform(u[:, 2], *ERASE_ASPECT)
        width = torch.sqrt(area * aspect).clamp(max=1.0)
        height = torch.sqrt(area / aspect).clamp(max=1.0)
        left = u[:, 3] * (1 - width)
        top = u[:, 4] * (1 - height)
        xs = (torch.arange(width_px, device=images.device, dtype=images.dtype) + 0.5) / width_px
        ys = (torch.arange(height_px, device=images.device, dtype=images.dtype) + 0.5) / height_px
        inside_x = (xs >= left[:, None]) & (xs < (left + width)[:, None])
        inside_y = (ys >= top[:, None]) & (ys < (top + height)[:, None])
        mask = inside_y[:, :, None] & inside_x[:, None, :] & chosen[:, None, None]
        return images.masked_fill(mask[:, None], 0.0)

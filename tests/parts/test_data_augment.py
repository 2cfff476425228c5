"""BatchAugment: shape, determinism, and each augmentation's effect in isolation."""

from __future__ import annotations

import math

import pytest
import torch

from hookbus.engine.config import AugmentConfig
from hookbus.parts.data import BatchAugment

SIZE = 16
PIXEL_CENTRES = (torch.arange(SIZE) + 0.5) / SIZE * 2 - 1
"""Normalised coordinates of the pixel centres, as ``affine_grid`` uses them."""


def only(**changes: object) -> BatchAugment:
    """An augment that is the identity except for ``changes``."""
    identity = {
        "crop_area": (1.0, 1.0),
        "crop_aspect": (1.0, 1.0),
        "shift": 0.0,
        "rotation": 0.0,
        "contrast": (1.0, 1.0),
        "brightness": 0.0,
        "noise_std": 0.0,
        "erase_prob": 0.0,
    }
    return BatchAugment(AugmentConfig(**{**identity, **changes}))


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def images(batch: int = 32) -> torch.Tensor:
    return torch.randn(batch, 1, SIZE, SIZE, generator=generator(123))


def x_ramp(batch: int = 64) -> torch.Tensor:
    """Images whose value is the pixel's x coordinate in [-1, 1]."""
    return PIXEL_CENTRES.expand(batch, 1, SIZE, SIZE).clone()


def test_keeps_shape_and_dtype() -> None:
    out = BatchAugment(AugmentConfig())(images(), generator())
    assert out.shape == (32, 1, SIZE, SIZE)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_same_generator_seed_gives_same_views() -> None:
    augment = BatchAugment(AugmentConfig())
    assert torch.equal(augment(images(), generator(5)), augment(images(), generator(5)))


def test_other_generator_seed_gives_other_views() -> None:
    augment = BatchAugment(AugmentConfig())
    first, second = augment(images(), generator(5)), augment(images(), generator(6))
    assert (first - second).abs().mean() > 0.1


def test_each_image_gets_its_own_parameters() -> None:
    same = images(1).expand(8, 1, SIZE, SIZE)
    out = BatchAugment(AugmentConfig())(same, generator())
    assert all((out[i] - out[0]).abs().mean() > 0.05 for i in range(1, 8))


def test_identity_settings_leave_images_unchanged() -> None:
    batch = images()
    torch.testing.assert_close(only()(batch, generator()), batch, atol=1e-5, rtol=0)


def test_crop_zooms_by_the_side_fraction() -> None:
    out = only(crop_area=(0.25, 0.25))(x_ramp(), generator())[..., 1:-1, 1:-1]
    # (the outer ring of pixels may sample the half pixel outside the outer centres)
    slope = (out[..., 1:] - out[..., :-1]) / (PIXEL_CENTRES[1] - PIXEL_CENTRES[0])
    torch.testing.assert_close(slope, torch.full_like(slope, 0.5), atol=1e-4, rtol=0)


def test_crop_aspect_sets_width_over_height() -> None:
    y_ramp = x_ramp().transpose(-1, -2)
    out_x = only(crop_area=(0.25, 0.25), crop_aspect=(4.0, 4.0))(x_ramp(), generator())
    out_y = only(crop_area=(0.25, 0.25), crop_aspect=(4.0, 4.0))(y_ramp, generator())
    step = PIXEL_CENTRES[1] - PIXEL_CENTRES[0]
    c = SIZE // 2
    width = (out_x[..., c, c] - out_x[..., c, c - 1]) / step
    height = (out_y[..., c, c] - out_y[..., c - 1, c]) / step
    torch.testing.assert_close(width, torch.full_like(width, 1.0), atol=1e-4, rtol=0)
    torch.testing.assert_close(height, torch.full_like(height, 0.25), atol=1e-4, rtol=0)


def test_rotation_stays_within_its_range() -> None:
    out = only(rotation=30.0)(x_ramp(), generator())[:, 0]
    c = SIZE // 2
    d_dx = out[:, c, c] - out[:, c, c - 1]
    d_dy = out[:, c, c] - out[:, c - 1, c]
    angles = torch.rad2deg(torch.atan2(-d_dy, d_dx))
    assert angles.abs().max() <= 30.0 + 1e-3
    assert angles.abs().max() > 20.0
    assert angles.min() < 0 < angles.max()


def test_shift_stays_within_its_range() -> None:
    out = only(shift=0.1)(x_ramp(), generator())
    c = SIZE // 2
    shift = (out[:, 0, c, c] - PIXEL_CENTRES[c]) / 2  # normalised coordinates span 2
    assert shift.abs().max() <= 0.1 + 1e-5
    assert shift.abs().max() > 0.07


def test_outside_pixels_take_the_image_minimum() -> None:
    batch = torch.full((16, 1, SIZE, SIZE), 2.0)
    batch[:, :, 4:12, 4:12] = 5.0
    out = only(shift=0.5)(batch, generator())
    assert out.min().item() == pytest.approx(2.0, abs=1e-5)
    assert (out - batch).abs().amax(dim=(1, 2, 3)).min() > 0.5


def test_contrast_scales_around_the_image_mean() -> None:
    batch = images()
    mean = batch.mean(dim=(1, 2, 3), keepdim=True)
    out = only(contrast=(2.0, 2.0))(batch, generator())
    torch.testing.assert_close(out, mean + 2 * (batch - mean), atol=1e-5, rtol=0)


def test_brightness_adds_one_bounded_value_per_image() -> None:
    batch = images()
    delta = only(brightness=0.5)(batch, generator()) - batch
    per_image = delta.mean(dim=(1, 2, 3))
    torch.testing.assert_close(
        delta, per_image.view(-1, 1, 1, 1).expand_as(delta), atol=1e-5, rtol=0
    )
    assert per_image.abs().max() <= 0.5
    assert per_image.std() > 0.1


def test_noise_has_the_configured_std() -> None:
    batch = images(256)
    noise = only(noise_std=0.2)(batch, generator()) - batch
    assert noise.mean().item() == pytest.approx(0.0, abs=0.01)
    assert noise.std().item() == pytest.approx(0.2, rel=0.02)


def test_erasing_zeroes_one_rectangle_of_the_configured_area() -> None:
    batch = torch.ones(64, 1, SIZE, SIZE)
    zero = only(erase_prob=1.0, erase_area=(0.25, 0.25))(batch, generator())[:, 0] == 0
    rows, cols = zero.any(dim=2).sum(dim=1), zero.any(dim=1).sum(dim=1)
    counts = zero.sum(dim=(1, 2))
    assert torch.equal(counts, rows * cols)  # a full rectangle
    fraction = counts.float() / SIZE**2
    assert fraction.min() > 0.15
    assert fraction.max() < 0.35
    assert fraction.mean().item() == pytest.approx(0.25, abs=0.03)


def test_erasing_probability_picks_that_share_of_images() -> None:
    batch = torch.ones(1000, 1, 8, 8)
    out = only(erase_prob=0.3)(batch, generator())
    erased = (out == 0).flatten(1).any(dim=1).float().mean().item()
    assert erased == pytest.approx(0.3, abs=0.05)
    assert math.isclose(out.max().item(), 1.0)

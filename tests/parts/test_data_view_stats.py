"""The crop_first views follow the documented distributions: crop area and aspect ratio
as torchvision's RandomResizedCrop, flip, jitter factors and order, grayscale, blur
probability and standard deviation, solarization, per view; and the image-folder recipes
hold the values docs/methods.md documents. Measured on the views of small images whose
content reveals what was applied."""

from __future__ import annotations

import colorsys
import math
import re
from collections import Counter
from pathlib import Path

import pytest
import torch
from torchvision.transforms import v2

from hookbus import load_config
from hookbus.engine.config import TorchvisionAugmentConfig
from hookbus.engine.process.threads import one_torch_thread
from hookbus.parts.data import photometric as P
from hookbus.parts.data.crop_collate import CropFirstCollate, ViewSpec

ROOT = Path(__file__).resolve().parents[2]
CELL, NUMBER = r" \| ([^|]+)", r" \| ([\d.]+)"
DOCS_TABLE = re.compile(
    r"^\| `(\w+)` \| ([\d.]+)-([\d.]+)" + CELL + NUMBER + NUMBER + CELL + CELL + r" \|$", re.M
)
"""A row of the recipes' augmentation table in docs/methods.md."""
PLAIN = {"mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)}
NOTHING = {"color_jitter_prob": 0.0, "grayscale_prob": 0.0, "blur_prob": 0.0}


def recipe_augment(name: str) -> TorchvisionAugmentConfig:
    return load_config(ROOT / "configs" / f"{name}.yaml").data.torchvision


def views(
    image: torch.Tensor, count: int, size: int, augment: TorchvisionAugmentConfig, **settings
) -> list[torch.Tensor]:
    """``count`` samples of ``image`` through every large view of ``augment`` (with
    ``settings`` over it, no normalisation), as one batch."""
    augment = augment.model_copy(update={**settings, **PLAIN})
    specs = [
        ViewSpec(size, augment.crop_scale, augment.for_view(number))
        for number in range(max(1, len(augment.per_view)))
    ]
    collate = CropFirstCollate(specs, None, augment, seed=0)
    with one_torch_thread():  # as the loader runs it
        return collate([(image, 0, index) for index in range(count)])["views"]


def constant(red: int, green: int, blue: int, size: int = 8) -> torch.Tensor:
    return torch.tensor([red, green, blue], dtype=torch.uint8).view(3, 1, 1).expand(3, size, size)


def within(values: torch.Tensor, low: float, high: float, slack: float = 1e-4) -> bool:
    return bool(values.min() >= low - slack and values.max() <= high + slack)


@pytest.mark.slow
def test_crops_and_flips_follow_torchvisions_random_resized_crop() -> None:
    augment = recipe_augment("simclr_imagefolder_resnet50")
    width, height, size, count = 240, 180, 24, 2000
    xs = torch.arange(width).view(1, width).expand(height, width)
    ys = torch.arange(height).view(height, 1).expand(height, width)
    image = torch.stack([xs, ys, torch.zeros_like(xs)]).to(torch.uint8)
    (view,) = views(image, count, size, augment, **NOTHING, solarize_prob=0.0)
    pixels = view * 255
    span_x = (pixels[:, 0, size // 2, 19] - pixels[:, 0, size // 2, 4]) * size / 15
    span_y = (pixels[:, 1, 19, size // 2] - pixels[:, 1, 4, size // 2]) * size / 15
    area = span_x.abs() * span_y / (width * height)
    aspect = span_x.abs() / span_y
    flip_rate = float((span_x < 0).float().mean())

    torch.manual_seed(0)
    boxes = [
        v2.RandomResizedCrop.get_params(
            torch.empty(height, width), list(augment.crop_scale), [3 / 4, 4 / 3]
        )
        for _ in range(count)
    ]
    expected_area = torch.tensor([h * w / (width * height) for _, _, h, w in boxes])
    expected_aspect = torch.tensor([w / h for _, _, h, w in boxes])
    quantiles = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9])
    torch.testing.assert_close(
        area.quantile(quantiles), expected_area.quantile(quantiles), atol=0.03, rtol=0
    )
    torch.testing.assert_close(
        aspect.log().quantile(quantiles),
        expected_aspect.log().quantile(quantiles),
        atol=0.03,
        rtol=0,
    )
    assert within(area, augment.crop_scale[0], 1.0, slack=0.02)
    large = area > 0.2  # boxes of 90 px and more: spans read to a pixel, ratios to 2%
    assert within(aspect[large], 3 / 4, 4 / 3, slack=0.03)
    assert abs(flip_rate - augment.flip_prob) < 0.03


def uniform_ok(values: torch.Tensor, low: float, high: float) -> bool:
    """``values`` within [low, high] with the mean and spread of a uniform there (to
    0.1 of its spread: about three standard errors for 1000 values)."""
    mean, spread = (low + high) / 2, (high - low) / math.sqrt(12)
    return (
        within(values, low, high)
        and abs(float(values.mean()) - mean) < 0.1 * spread + 1e-6
        and abs(float(values.std()) - spread) < 0.1 * spread + 1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["simclr_imagefolder_resnet50", "byol_imagefolder_resnet50"])
def test_jitter_factors_are_uniform_in_the_documented_ranges(recipe: str) -> None:
    augment = recipe_augment(recipe)
    brightness, contrast, saturation, hue = augment.color_jitter
    count, full = 1000, {"crop_scale": (1.0, 1.0), "flip_prob": 0.0, "solarize_prob": 0.0}
    only = {**NOTHING, "color_jitter_prob": 1.0, **full, "per_view": []}

    (view,) = views(
        constant(100, 100, 100), count, 8, augment, **only, color_jitter=(brightness, 0, 0, 0)
    )
    assert uniform_ok(view[:, 0, 0, 0] * 255 / 100, 1 - brightness, 1 + brightness)

    halves = constant(102, 102, 102, 16).clone()
    halves[:, :, 8:] = 153
    (view,) = views(halves, count, 16, augment, **only, color_jitter=(0, contrast, 0, 0))
    factor = (view[:, 0, 0, 15] - view[:, 0, 0, 0]) * 255 / 51
    assert uniform_ok(factor, 1 - contrast, 1 + contrast)

    (view,) = views(
        constant(153, 102, 102), count, 8, augment, **only, color_jitter=(0, 0, saturation, 0)
    )
    factor = (view[:, 0, 0, 0] - view[:, 1, 0, 0]) * 255 / 51
    assert uniform_ok(factor, max(0, 1 - saturation), 1 + saturation)

    source_hue = colorsys.rgb_to_hsv(200 / 255, 80 / 255, 120 / 255)[0]
    (view,) = views(constant(200, 80, 120), count, 8, augment, **only, color_jitter=(0, 0, 0, hue))
    shifts = [
        (colorsys.rgb_to_hsv(*view[i, :, 0, 0].tolist())[0] - source_hue + 0.5) % 1 - 0.5
        for i in range(count)
    ]
    assert uniform_ok(torch.tensor(shifts), -hue, hue)


@pytest.mark.slow
def test_jitter_rate_order_and_grayscale_rate_are_the_documented_ones() -> None:
    augment = recipe_augment("simclr_imagefolder_resnet50")
    count = 3000
    image = constant(150, 90, 60)
    (view,) = views(image, count, 8, augment, blur_prob=0.0, solarize_prob=0.0)
    pixel = view[:, :, 0, 0] * 255
    gray = (pixel.amax(1) - pixel.amin(1)) < 1e-3
    changed = (pixel - torch.tensor([150, 90, 60])).abs().amax(1) > 1e-3
    assert abs(float(gray.float().mean()) - augment.grayscale_prob) < 0.02
    assert (
        abs(
            float(changed.float().mean())
            - (1 - (1 - augment.color_jitter_prob) * (1 - augment.grayscale_prob))
        )
        < 0.02
    )
    uniforms = torch.rand(count, P.COLOR_UNIFORMS, generator=torch.Generator().manual_seed(3))
    orders = P.draw_color_params(uniforms, augment)[:, P.ORDER : P.ORDER + 4]
    assert sorted(orders[0].tolist()) == [0, 1, 2, 3]
    frequencies = Counter(tuple(row) for row in orders.int().tolist())
    assert len(frequencies) == 24 and max(frequencies.values()) < 1.5 * count / 24


def blur_sigma(view: torch.Tensor) -> torch.Tensor:
    """The standard deviation of the Gaussian that spread a centred impulse on a
    constant background into each view's row: the discrete kernel's variance, inverted
    on a fine grid."""
    row = view[:, 0, view.shape[-1] // 2]
    row = row - row[:, :1]  # the impulse over the constant background
    taps = torch.arange(row.shape[-1], dtype=torch.float64) - row.shape[-1] // 2
    weights = row.double() / row.double().sum(dim=1, keepdim=True)
    variance = (weights * taps**2).sum(dim=1)
    grid = torch.linspace(0.05, 2.5, 5000, dtype=torch.float64)
    kernel = torch.exp(-0.5 * (taps[None] / grid[:, None]) ** 2)
    grid_variance = (kernel * taps**2).sum(1) / kernel.sum(1)
    return grid[torch.searchsorted(grid_variance, variance).clamp(max=len(grid) - 1)]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["simclr_imagefolder_resnet50", "byol_imagefolder_resnet50"])
def test_blur_and_solarization_rates_and_sigma_per_view(recipe: str) -> None:
    augment = recipe_augment(recipe)
    count, size = 500, 224
    impulse = torch.full((3, size, size), 200, dtype=torch.uint8)
    impulse[:, size // 2, size // 2] = 255
    settings = {
        "crop_scale": (1.0, 1.0),
        "flip_prob": 0.0,
        "color_jitter_prob": 0.0,
        "grayscale_prob": 0.0,
    }
    results = views(impulse, count, size, augment, **settings)
    for number, view in enumerate(results):
        expected = augment.for_view(number)
        solarized = view[:, 0, 0, 0] < 0.5  # the background, 200 of 255, turns dark
        blurred = (view[:, 0, size // 2, size // 2 + 1] - view[:, 0, 0, 0]).abs() > 1e-30
        assert abs(float(solarized.float().mean()) - expected.solarize_prob) < 0.05
        assert abs(float(blurred.float().mean()) - expected.blur_prob) < 0.05
        plain = view[blurred & ~solarized]
        if expected.blur_prob >= 0.5:
            sigma = blur_sigma(plain)
            assert uniform_ok(sigma, *expected.blur_sigma) or (
                within(sigma, *expected.blur_sigma, slack=0.01)
                and abs(float(sigma.mean()) - sum(expected.blur_sigma) / 2) < 0.1
            )


def documented_recipes() -> dict[str, tuple[str, ...]]:
    text = (ROOT / "docs" / "methods.md").read_text()
    return {match[0]: match[1:] for match in DOCS_TABLE.findall(text)}


@pytest.mark.slow
def test_every_image_folder_recipe_holds_its_documented_augmentations() -> None:
    documented = documented_recipes()
    recipes = sorted(path.stem for path in (ROOT / "configs").glob("*_imagefolder_*.yaml"))
    assert sorted(documented) == recipes
    for name, (low, high, jitter, jitter_prob, gray, blur, solarize) in documented.items():
        augment = recipe_augment(name)
        large = [
            augment.for_view(n)
            for n in range(load_config(ROOT / "configs" / f"{name}.yaml").data.num_views)
        ]
        assert augment.crop_scale == (float(low), float(high)), name
        assert augment.color_jitter == tuple(float(v) for v in jitter.split(",")), name
        assert (augment.color_jitter_prob, augment.grayscale_prob) == (
            float(jitter_prob),
            float(gray),
        ), name
        assert [view.blur_prob for view in large] == [float(v) for v in blur.split(",")], name
        assert [view.solarize_prob for view in large] == [float(v) for v in solarize.split(",")], (
            name
        )

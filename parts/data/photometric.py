"""The color augmentations of uint8 crops, one set of parameters per image.

The parameters are drawn where the crops are cut (:func:`draw_color_params`, from the
batch's seeded uniform numbers) and travel with the batch, so the augmentations can run
in the loader or on the training device with the same result (:func:`color_augment`).
Each adjustment is torchvision's on float images in [0, 1] (``transforms.v2``'s
``ColorJitter``, ``RandomGrayscale``, ``GaussianBlur``, ``RandomSolarize``,
``Normalize``), written for a batch with a value per image.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.engine.config import TorchvisionAugmentConfig
from hookbus.engine.process.threads import one_torch_thread
from hookbus.parts.data.collate import Batch

SOLARIZE_THRESHOLD = 128 / 255
"""Solarization inverts pixels at or above this value (128 of a uint8 image)."""

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)
"""Red, green and blue weights of the grayscale image, torchvision's."""

BLUR_TRUNCATION = 4.0
"""Blur taps farther than this many standard deviations from the centre are left out:
their weights are below 3.4e-4 of the centre's and 6.4e-5 of the kernel together."""

COLOR_UNIFORMS = 13
"""Uniform numbers one view's color parameters take."""

JITTER, ORDER, FACTORS, GRAY, BLUR, SIGMA, SOLARIZE = 0, 1, 5, 9, 10, 11, 12
"""Columns of a view's parameter rows ``[B, NUM_PARAMS]``: jitter on (1) or off (0), the
four jitter adjustments in the order they run (from ORDER), their factors (from
FACTORS: brightness, contrast, saturation, hue shift), grayscale, blur on, the blur's
standard deviation, solarization on."""

NUM_PARAMS = 13

HUE = 3
"""The hue shift's number among the jitter adjustments, as the ORDER and FACTORS columns
number them: brightness 0, contrast 1, saturation 2, hue 3."""


def blur_kernel_size(size: int) -> int:
    """The Gaussian blur's kernel size for views of ``size`` pixels: about a tenth of the
    side, odd, at least 3 (SimCLR's: 23 at 224 px)."""
    kernel = max(3, size // 10)
    return kernel if kernel % 2 else kernel + 1


def _between(u: Tensor, low: float, high: float) -> Tensor:
    return low + (high - low) * u


def draw_color_params(uniforms: Tensor, cfg: TorchvisionAugmentConfig) -> Tensor:
    """The color parameters ``[B, NUM_PARAMS]`` (float32) of one view of ``B`` images,
    from ``uniforms [B, COLOR_UNIFORMS]`` in [0, 1), with ``cfg``'s distributions.

    As torchvision's transforms draw them: jitter with probability
    ``color_jitter_prob``, its four adjustments in a uniformly random order, the
    brightness, contrast and saturation factors uniform in ``[max(0, 1 - x), 1 + x]``,
    the hue shift uniform in ``[-x, x]``; grayscale, blur and solarization each with
    its probability, the blur's standard deviation uniform in ``blur_sigma``.
    """
    u = uniforms.double()
    params = torch.zeros(len(u), NUM_PARAMS, dtype=torch.float64)
    params[:, JITTER] = (u[:, 0] < cfg.color_jitter_prob).double()
    params[:, ORDER : ORDER + 4] = u[:, 1:5].argsort(dim=1).double()
    *scales, hue = cfg.color_jitter
    for column, strength in enumerate(scales):
        low = max(0.0, 1 - strength)
        params[:, FACTORS + column] = _between(u[:, 5 + column], low, 1 + strength)
    params[:, FACTORS + HUE] = _between(u[:, 8], -hue, hue)
    params[:, GRAY] = (u[:, 9] < cfg.grayscale_prob).double()
    params[:, BLUR] = (u[:, 10] < cfg.blur_prob).double()
    params[:, SIGMA] = _between(u[:, 11], *cfg.blur_sigma)
    params[:, SOLARIZE] = (u[:, 12] < cfg.solarize_prob).double()
    return params.float()


def _gray(images: Tensor) -> Tensor:
    """The grayscale ``[B, 1, H, W]`` of RGB ``images``, as torchvision computes it."""
    red, green, blue = images.unbind(dim=1)
    gray = red.mul(GRAY_WEIGHTS[0]).add_(green, alpha=GRAY_WEIGHTS[1])
    return gray.add_(blue, alpha=GRAY_WEIGHTS[2]).unsqueeze(1)


def _to_device(values: Tensor, device: torch.device) -> Tensor:
    """``values`` (a small CPU tensor) on ``device``, without the host waiting for the
    device: through pinned memory to a GPU (a copy from pageable memory would wait for
    the work queued before it)."""
    if device.type == "cpu":
        return values
    return values.pin_memory().to(device, non_blocking=True)


def _per_image(values: Tensor, images: Tensor) -> Tensor:
    """``values [k]`` on the images' device, shaped ``[k, 1, 1, 1]`` to broadcast."""
    return _to_device(values, images.device).view(-1, 1, 1, 1)


def _brightness(images: Tensor, factor: Tensor) -> None:
    images.mul_(_per_image(factor, images)).clamp_(0, 1)


def _contrast(images: Tensor, factor: Tensor) -> None:
    factor = _per_image(factor, images)
    mean = _gray(images).mean(dim=(1, 2, 3), keepdim=True)
    images.mul_(factor).add_(mean * (1 - factor)).clamp_(0, 1)


def _saturation(images: Tensor, factor: Tensor) -> None:
    factor = _per_image(factor, images)
    gray = _gray(images).mul_(1 - factor)
    images.mul_(factor).add_(gray).clamp_(0, 1)


def _hue(images: Tensor, shift: Tensor) -> None:
    """Shift the HSV hue of ``images`` by ``shift`` turns, in place.

    torchvision's RGB -> HSV -> RGB round trip in closed form: a pixel keeps its
    maximum ``v`` and its chroma ``c = v - min``; with ``g`` six times its new hue
    (mod 6), each channel becomes ``v - c * clamp(2 - d, 0, 1)``, ``d`` the distance
    from ``g`` to the channel's centre on the circle of length 6 (red 3, green 5, blue
    1). Written with arithmetic only (comparisons into float masks), which runs several
    times faster on a CPU than masked selection; on a CPU one image at a time, whose
    color planes are contiguous (planes strided across a batch run several times
    slower there).
    """
    if images.device.type == "cpu" and len(images) > 1:
        for number in range(len(images)):
            _hue(images[number : number + 1], shift[number : number + 1])
        return
    red, green, blue = images.unbind(dim=1)
    high = images.amax(dim=1)
    chroma = high - images.amin(dim=1)
    is_red = torch.eq(high, red, out=torch.empty_like(high))
    is_green = torch.eq(high, green, out=torch.empty_like(high))
    is_green.addcmul_(is_green, is_red, value=-1)
    is_blue = is_red.neg().sub_(is_green).add_(1)
    hue6 = (green - blue).mul_(is_red)
    hue6.addcmul_((blue - red).add_(chroma, alpha=2), is_green)
    hue6.addcmul_((red - green).add_(chroma, alpha=4), is_blue)
    safe_chroma = torch.eq(chroma, 0, out=torch.empty_like(chroma)).add_(chroma)
    hue6.div_(safe_chroma).add_(6 * _per_image(shift, images).view(-1, 1, 1))
    hue6.add_(torch.floor(hue6 / 6), alpha=-6)
    # With d = |g - c|: red (c = 3) takes clamp(2 - d, 0, 1); green and blue, whose
    # distance runs around the circle (3 - |d - 3|), take clamp(|d - 3| - 1, 0, 1).
    for channel, centre in enumerate((3.0, 5.0, 1.0)):
        offset = (hue6 - centre).abs_()
        amount = offset.neg_().add_(2) if centre == 3.0 else offset.sub_(3).abs_().sub_(1)
        torch.addcmul(high, amount.clamp_(0, 1), chroma, value=-1, out=images[:, channel])


def _grayscale(images: Tensor, _: Tensor) -> None:
    images.copy_(_gray(images).expand_as(images))


def _solarize(images: Tensor, _: Tensor) -> None:
    images.copy_(torch.where(images >= SOLARIZE_THRESHOLD, 1 - images, images))


def blur_weights(sigma: Tensor, kernel_size: int) -> Tensor:
    """Per-image one-sided blur weights ``[B, R + 1]`` (centre first) for standard
    deviations ``sigma [B]``: torchvision's Gaussian kernel of ``kernel_size`` taps with
    the taps beyond :data:`BLUR_TRUNCATION` standard deviations set to zero and the rest
    normalised to sum to one; ``R`` is the largest radius kept in the batch."""
    sigmas = sigma.double().tolist()
    radii = [min(math.ceil(BLUR_TRUNCATION * value), kernel_size // 2) for value in sigmas]
    rows = []
    for value, radius in zip(sigmas, radii, strict=True):
        row = [math.exp(-0.5 * (tap / value) ** 2) for tap in range(radius + 1)]
        total = 2 * sum(row) - row[0]
        rows.append([weight / total for weight in row] + [0.0] * (max(radii) - radius))
    return torch.tensor(rows, dtype=torch.float32)


def _reflect_pad(images: Tensor, radius: int, dim: int) -> Tensor:
    """``images`` padded by ``radius`` pixels on both sides of ``dim`` (-1 or -2), each
    border mirrored without repeating the edge pixel (torch's "reflect")."""
    if dim == -2:
        return F.pad(images, (0, 0, radius, radius), mode="reflect")
    size = images.shape[-1]
    left = images.narrow(-1, 1, radius).flip(-1)
    right = images.narrow(-1, size - radius - 1, radius).flip(-1)
    return torch.cat([left, images, right], dim=-1)


def _blur_pass(images: Tensor, weights: Tensor, dim: int) -> Tensor:
    """``images`` convolved along ``dim`` (-1 or -2) with symmetric ``weights [k, R + 1]``,
    reflect padding: shifted copies added centre first, then at distance 1, 2, ...; a
    zero weight adds exactly nothing, so an image's result does not depend on the
    others' radii."""
    radius = weights.shape[1] - 1
    size = images.shape[dim]
    padded = _reflect_pad(images, radius, dim) if radius else images
    per_image = _to_device(weights, images.device).view(len(images), -1, 1, 1, 1)
    out = padded.narrow(dim, radius, size) * per_image[:, 0]
    for distance in range(1, radius + 1):
        out.addcmul_(padded.narrow(dim, radius - distance, size), per_image[:, distance])
        out.addcmul_(padded.narrow(dim, radius + distance, size), per_image[:, distance])
    return out


def _blur(images: Tensor, sigma: Tensor) -> None:
    weights = blur_weights(sigma, blur_kernel_size(images.shape[-1]))
    images.copy_(_blur_pass(_blur_pass(images, weights, -1), weights, -2))


Adjustment = Callable[[Tensor, Tensor], None]

_JITTER: tuple[Adjustment, ...] = (_brightness, _contrast, _saturation, _hue)
_IDENTITY = (1.0, 1.0, 1.0, 0.0)


_RUNS_IN_PLACE = 4
"""Up to this many runs of consecutive images are adjusted in place, run by run; more
are gathered into one subset and scattered back."""


def _runs(index: list[int]) -> list[tuple[int, int]]:
    """``(start, length)`` of the runs of consecutive numbers in sorted ``index``."""
    runs: list[tuple[int, int]] = []
    for i in index:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def _apply(images: Tensor, index: list[int], adjust: Adjustment, values: list[float]) -> None:
    """Run ``adjust`` in place on the images at ``index`` with their ``values`` (chosen
    on the host, so that the device never waits for a choice)."""
    if not index:
        return
    runs = _runs(index)
    if len(runs) <= _RUNS_IN_PLACE:
        done = 0
        for start, length in runs:
            chosen = torch.tensor(values[done : done + length], dtype=torch.float32)
            adjust(images.narrow(0, start, length), chosen)
            done += length
        return
    on_device = _to_device(torch.tensor(index), images.device)
    subset = images.index_select(0, on_device)
    adjust(subset, torch.tensor(values, dtype=torch.float32))
    images.index_copy_(0, on_device, subset)


def augment_colors(images: Tensor, params: Tensor) -> None:
    """Augment float32 ``images [B, 3, S, S]`` in [0, 1] in place with the color
    parameters ``params [B, NUM_PARAMS]`` (on the CPU).

    In order: the color jitter (brightness, contrast, saturation, hue, each clamped
    to [0, 1], in each image's order), grayscale, Gaussian blur (kernel
    :func:`blur_kernel_size`, reflect padding, taps within :data:`BLUR_TRUNCATION`
    standard deviations), solarization. Each image's result depends on its own pixels
    and parameters only, not on the other images of the batch.
    """
    rows = params.tolist()
    for position in range(4):
        for op, adjust in enumerate(_JITTER):
            column, identity = FACTORS + op, _IDENTITY[op]
            index = [
                i
                for i, row in enumerate(rows)
                if row[JITTER] and row[ORDER + position] == op and row[column] != identity
            ]
            _apply(images, index, adjust, [rows[i][column] for i in index])
    for column, adjust, value in (
        (GRAY, _grayscale, GRAY),
        (BLUR, _blur, SIGMA),
        (SOLARIZE, _solarize, SOLARIZE),
    ):
        index = [i for i, row in enumerate(rows) if row[column]]
        _apply(images, index, adjust, [rows[i][value] for i in index])


def color_augment(
    crops: Tensor,
    params: Tensor,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    out: Tensor | None = None,
) -> Tensor:
    """The augmented, normalised float32 views of uint8 ``crops [B, 3, S, S]`` with the
    color parameters ``params [B, NUM_PARAMS]`` (on the CPU), into ``out`` when given:
    :func:`augment_colors`, then ``(x - mean) / std``."""
    if out is None:
        out = torch.empty(crops.shape, dtype=torch.float32, device=crops.device)
    images = torch.mul(crops, 1 / 255, out=out)
    augment_colors(images, params)
    return normalize(images, mean, std)


def normalize(
    images: Tensor,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    out: Tensor | None = None,
) -> Tensor:
    """``(images - mean) / std`` per channel as one multiply-add, into ``out`` (by
    default in place)."""
    scale = _to_device(torch.tensor([1 / value for value in std]), images.device)
    shift = _to_device(
        torch.tensor([-m / v for m, v in zip(mean, std, strict=True)]), images.device
    )
    target = images if out is None else out
    return torch.addcmul(shift.view(1, 3, 1, 1), images, scale.view(1, 3, 1, 1), out=target)


def finish_views(
    batch: Batch,
    device: torch.device | str,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
) -> Batch:
    """``batch`` with its uint8 crops (``"views"``) moved to ``device`` and augmented
    there with their color parameters (``"view_params"``, which it no longer holds); a
    batch without them is returned as it is.

    On a GPU each view of the whole batch is augmented at once; on a CPU image by
    image on one torch thread, as the loader does it (``data.augment_device: cpu``),
    which keeps each crop in the cache and gives the same values.
    """
    if "view_params" not in batch:
        return batch
    views = []
    on_cpu = torch.device(device).type == "cpu"
    with one_torch_thread() if on_cpu else nullcontext():
        for crops, params in zip(batch["views"], batch["view_params"], strict=True):
            crops = crops.to(device, non_blocking=True)
            out = torch.empty(crops.shape, dtype=torch.float32, device=device)
            step = 1 if on_cpu else len(crops)
            for start in range(0, len(crops), step):
                part = slice(start, start + step)
                color_augment(crops[part], params[part], mean, std, out=out[part])
            views.append(out)
    finished = {key: value for key, value in batch.items() if key != "view_params"}
    finished["views"] = views
    return finished

"""The pictures of a ViT encoder: the class token's attention over the patches in the last
block, per head (DINO's figure), and the first three principal components of the patch
features shown as colours (DINOv2's)."""

from __future__ import annotations

import io
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits
from torch import Tensor, nn

from hookbus.eval_features import ViTParts, vit_parts
from hookbus.parts.models.ijepa import patch_tokens

MOST_HEADS = 6
"""The most heads drawn one by one beside their mean."""


@dataclass(frozen=True)
class ViTPictures:
    """For images ``[B, 3, H, W]``: ``attention`` ``[B, heads, h, w]`` (the class token's
    attention over the ``h`` x ``w`` patches in the last block, each map summing to one)
    and ``colours`` ``[B, h, w, 3]`` (patch PCA colours in [0, 1]), with the PNGs."""

    attention: Tensor
    colours: Tensor
    attention_png: bytes
    pca_png: bytes


def patch_grid(images: Tensor, patches: int) -> tuple[int, int]:
    """The patch grid ``(h, w)`` of ``patches`` patches on images ``[B, C, H, W]``: the
    grid of the images' aspect whose size is ``patches``."""
    height, width = images.shape[-2:]
    side = round((patches * height / width) ** 0.5)
    if side < 1 or patches % side:
        raise ValueError(f"{patches} patches do not tile a {height}x{width} image")
    return side, patches // side


@contextmanager
def _last_attention(parts: ViTParts) -> Any:
    """A list that receives the last block's attention weights ``[B, heads, T, T]`` at
    each forward: torch's ``MultiheadAttention`` asked for them per head, or timm's
    ``Attention`` recomputed from its input (its query, key and their norms)."""
    block = cast(Any, parts.blocks[-1])
    captured: list[Tensor] = []
    handles = []
    if isinstance(getattr(block, "self_attention", None), nn.MultiheadAttention):

        def ask(module: nn.Module, args: Any, kwargs: dict) -> tuple[Any, dict]:
            return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

        def keep(module: nn.Module, args: Any, kwargs: dict, output: Any) -> None:
            captured.append(output[1])

        attention = block.self_attention
        handles.append(attention.register_forward_pre_hook(ask, with_kwargs=True))
        handles.append(attention.register_forward_hook(keep, with_kwargs=True))
    elif hasattr(getattr(block, "attn", None), "qkv"):
        attention = block.attn

        def recompute(module: Any, args: Any) -> None:
            x = args[0]
            batch, tokens, _ = x.shape
            qkv = module.qkv(x).reshape(batch, tokens, 3, module.num_heads, -1)
            q, k = qkv.permute(2, 0, 3, 1, 4)[:2]
            q, k = module.q_norm(q), module.k_norm(k)
            captured.append(((q * module.scale) @ k.transpose(-2, -1)).softmax(dim=-1))

        handles.append(attention.register_forward_pre_hook(recompute))
    else:
        raise ValueError(f"no attention weights to read in {type(block).__name__}")
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def class_attention(model: nn.Module, parts: ViTParts, images: Tensor) -> Tensor:
    """The class token's attention over the patches in the last block, ``[B, heads, N]``,
    renormalised over the patches (each row sums to one; the class token's attention to
    itself and to registers left out)."""
    with _last_attention(parts) as captured, torch.inference_mode():
        cast(nn.Module, model.backbone)(images)
    weights = captured[-1][:, :, 0, parts.prefix :].double()
    return weights / weights.sum(dim=-1, keepdim=True)


def patch_pca_colours(tokens: Tensor, grid: tuple[int, int]) -> Tensor:
    """Patch tokens ``[B, N, D]`` as colours ``[B, h, w, 3]``: the projections of every
    patch of every image on the first three principal components of them all
    (scikit-learn's PCA, signs as it fixes them), each scaled to [0, 1] over the patches."""
    batch, _, dims = tokens.shape
    flat = tokens.reshape(-1, dims).double().cpu().numpy()
    with threadpool_limits(1):  # a small SVD: a pool of threads only waits on busy cores
        projected = PCA(n_components=3, svd_solver="full").fit_transform(flat)
    low, high = projected.min(axis=0), projected.max(axis=0)
    colours = (projected - low) / np.where(high > low, high - low, 1.0)
    return torch.from_numpy(colours).view(batch, *grid, 3)


def vit_pictures(
    model: nn.Module, images: Tensor, shown: Callable[[Tensor], Tensor]
) -> ViTPictures | None:
    """The attention maps and PCA colours of ``images`` (the encoder's view) with their
    pictures, ``shown`` mapping the images to RGB; None when the backbone is no ViT."""
    parts = vit_parts(model)
    if parts is None:
        return None
    device = next(model.parameters()).device
    images = images.to(device)
    attention = class_attention(model, parts, images).float().cpu()
    with torch.inference_mode():
        tokens = patch_tokens(cast(nn.Module, model.backbone), images).float().cpu()
    grid = patch_grid(images, tokens.shape[1])
    attention = attention.view(len(images), -1, *grid)
    colours = patch_pca_colours(tokens, grid).float()
    rgb = shown(images.cpu())
    return ViTPictures(
        attention, colours, _attention_figure(rgb, attention), _pca_figure(rgb, colours)
    )


def _upsampled(maps: Tensor, size: tuple[int, int]) -> np.ndarray:
    """Maps ``[..., h, w]`` (or colours ``[h, w, 3]``) at the image's size, nearest."""
    if maps.dim() == 3 and maps.shape[-1] == 3:
        return (
            F.interpolate(maps.permute(2, 0, 1)[None], size=size, mode="nearest")[0]
            .permute(1, 2, 0)
            .numpy()
        )
    return F.interpolate(maps[None, None], size=size, mode="nearest")[0, 0].numpy()


def _figure(rows: int, columns: int) -> tuple[Any, Any]:
    figure = Figure(figsize=(1.6 * columns, 1.6 * rows + 0.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = np.asarray(figure.subplots(rows, columns, squeeze=False))
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    return figure, axes


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _attention_figure(rgb: Tensor, attention: Tensor) -> bytes:
    """Per image: the image, the heads' mean attention, then each head (up to
    :data:`MOST_HEADS`)."""
    heads = min(attention.shape[1], MOST_HEADS)
    figure, axes = _figure(len(rgb), 2 + heads)
    size = (rgb.shape[-2], rgb.shape[-1])
    for row, (image, maps) in enumerate(zip(rgb, attention, strict=True)):
        axes[row, 0].imshow(image.permute(1, 2, 0).numpy())
        axes[row, 1].imshow(_upsampled(maps.mean(dim=0), size), cmap="inferno")
        for head in range(heads):
            axes[row, 2 + head].imshow(_upsampled(maps[head], size), cmap="inferno")
    axes[0, 0].set_title("image", fontsize="small")
    axes[0, 1].set_title("mean", fontsize="small")
    for head in range(heads):
        axes[0, 2 + head].set_title(f"head {head}", fontsize="small")
    figure.suptitle("class-token attention over the patches, last block", fontsize="small")
    return _png(figure)


def _pca_figure(rgb: Tensor, colours: Tensor) -> bytes:
    """Per image: the image and its patches' PCA colours."""
    figure, axes = _figure(2, len(rgb))
    size = (rgb.shape[-2], rgb.shape[-1])
    for column, (image, painted) in enumerate(zip(rgb, colours, strict=True)):
        axes[0, column].imshow(image.permute(1, 2, 0).numpy())
        axes[1, column].imshow(_upsampled(painted, size))
    figure.suptitle("patch features: first three principal components as RGB", fontsize="small")
    return _png(figure)

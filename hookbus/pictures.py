"""The pictures of an evaluation: a t-SNE map of the test features coloured by class, a
grid of test images with their nearest train images, for a ViT its class-token attention
maps and patch PCA colours (:mod:`hookbus.pictures_vit`), written as PNG files and into
TensorBoard, with the projector's embedding of the test images and their thumbnails."""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image
from sklearn.manifold import TSNE
from tensorboardX import SummaryWriter
from threadpoolctl import threadpool_limits
from torch import Tensor, nn

from hookbus.engine.errors import writing
from hookbus.eval_data import LabelledData
from hookbus.eval_features import BACKBONE, SplitFeatures
from hookbus.output_paths import write_output
from hookbus.pictures_vit import vit_pictures

PICTURES_DIR = "pictures"
"""The pictures' folder in the evaluation's output folder."""

TENSORBOARD_DIR = "tensorboard"
"""TensorBoard's folder in the output folder (a run's own)."""

EVAL_RUN = "eval"
"""The TensorBoard run (a folder under ``tensorboard/``) of the pictures and projector."""

PROJECTOR_TAG = "eval_backbone"
"""The projector's name of the embedding of the test images."""

MAP_POINTS = 1000
"""The most test images on the t-SNE map and in the projector (a seeded choice)."""

QUERIES = 8
"""Test images in the nearest-neighbour grid, one per row."""

NEIGHBOURS = 6
"""Nearest train images per query."""

CELL = 64
"""Side of an image in the grid, in pixels."""

THUMBNAIL = 32
"""Side of the projector's thumbnails, in pixels."""


@dataclass(frozen=True)
class EmbeddingMap:
    """A 2-D t-SNE map: ``points`` ``[n, 2]`` of the test images ``indices`` (one each),
    their ``labels``."""

    points: np.ndarray
    indices: np.ndarray
    labels: np.ndarray


def map_indices(count: int, seed: int, most: int = MAP_POINTS) -> np.ndarray:
    """The test images shown on the map: all when ``count <= most``, else a seeded choice
    of ``most`` (sorted)."""
    if count <= most:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(count, most, replace=False))


def embedding_map(test: SplitFeatures, seed: int, most: int = MAP_POINTS) -> EmbeddingMap:
    """t-SNE (scikit-learn, PCA init, seeded) of the L2-normalised backbone features of
    the test images :func:`map_indices` picks; perplexity 30, or less for few images.
    It runs on one thread: on busy cores a pool of them waits on each other (500 points
    took 163 s on 2 threads and 21 s on one, at a load average of 16 on 2 cores)."""
    indices = map_indices(len(test.labels), seed, most)
    features = F.normalize(test.features[BACKBONE][indices].double(), dim=1).numpy()
    perplexity = min(30.0, max(1.0, (len(indices) - 1) / 3))
    with threadpool_limits(1):
        points = TSNE(
            n_components=2, perplexity=perplexity, init="pca", random_state=seed
        ).fit_transform(features)
    return EmbeddingMap(points, indices, test.labels[indices].numpy())


def map_figure(found: EmbeddingMap, classes: list[str]) -> bytes:
    """The map as a PNG: one dot per image, coloured by class, with a legend."""
    figure = Figure(figsize=(6.4, 5.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    colours = _class_colours(len(classes))
    for label, name in enumerate(classes):
        chosen = found.labels == label
        if chosen.any():
            x, y = found.points[chosen].T
            axes.scatter(x, y, s=8, color=colours[label], label=name)
    axes.set_title(f"t-SNE of the test features ({len(found.indices)} images)")
    axes.set_xticks([])
    axes.set_yticks([])
    if len(classes) <= 20:
        axes.legend(fontsize="small", markerscale=2, loc="best")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _class_colours(count: int) -> list[tuple[float, ...]]:
    """A distinct colour per class: tab10 or tab20's, else ``count`` hues around a circle."""
    if count <= 20:
        palette = colormaps["tab10" if count <= 10 else "tab20"]
        return [tuple(palette(index)) for index in range(count)]
    return [tuple(colormaps["hsv"](index / count)) for index in range(count)]


def query_indices(labels: Tensor, seed: int, count: int = QUERIES) -> np.ndarray:
    """Test images for the grid: a seeded choice of ``count`` (all when fewer), sorted."""
    return map_indices(len(labels), seed, count)


def nearest_train(
    train: SplitFeatures, test: SplitFeatures, queries: np.ndarray, k: int
) -> np.ndarray:
    """Indices ``[Q, k]`` of the train images nearest each query (cosine similarity of the
    backbone features, highest first; at most the train split's size)."""
    memory = F.normalize(train.features[BACKBONE].float(), dim=1)
    asked = F.normalize(test.features[BACKBONE][torch.from_numpy(queries)].float(), dim=1)
    return (asked @ memory.T).topk(min(k, len(memory)), dim=1).indices.numpy()


def neighbour_grid(
    query_images: Tensor, neighbour_images: Tensor, same_class: np.ndarray, cell: int = CELL
) -> np.ndarray:
    """The grid as an RGB array ``[Q * (cell + 4), (1 + k) * (cell + 4), 3]`` (uint8): row
    ``q`` holds query ``q`` (grey frame) then its neighbours, framed green when of the
    query's class and red when not. ``query_images`` ``[Q, 3, S, S]`` and
    ``neighbour_images`` ``[Q, k, 3, S, S]`` are in [0, 1]."""
    rows, k = neighbour_images.shape[:2]
    side = cell + 4
    grid = np.full((rows * side, (1 + k) * side, 3), 255, dtype=np.uint8)
    frames = {None: (128, 128, 128), True: (40, 160, 40), False: (210, 40, 40)}
    for row in range(rows):
        cells = [(query_images[row], None)] + [
            (neighbour_images[row, column], bool(same_class[row, column])) for column in range(k)
        ]
        for column, (image, same) in enumerate(cells):
            top, left = row * side, column * side
            grid[top : top + side, left : left + side] = frames[same]
            grid[top + 2 : top + 2 + cell, left + 2 : left + 2 + cell] = _cell(image, cell)
    return grid


def _cell(image: Tensor, cell: int) -> np.ndarray:
    """``image`` ``[3, S, S]`` in [0, 1] as a ``cell`` x ``cell`` uint8 array (nearest
    neighbour up, antialiased down)."""
    mode = "nearest" if image.shape[-1] < cell else "bilinear"
    resized = F.interpolate(
        image.unsqueeze(0), size=(cell, cell), mode=mode, antialias=mode == "bilinear"
    )[0]
    return (resized.clamp(0, 1) * 255).round().byte().permute(1, 2, 0).numpy()


def split_images(labelled: LabelledData, split: str, indices: np.ndarray) -> Tensor:
    """The images ``indices`` of ``split`` as the encoder sees them ``[n, C, S, S]``."""
    dataset = labelled.train if split == "train" else labelled.test
    return labelled.collate([dataset[int(index)] for index in indices])["image"]


def png(array: np.ndarray) -> bytes:
    """An RGB uint8 array as PNG bytes."""
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def draw_pictures(
    model: nn.Module,
    labelled: LabelledData,
    splits: dict[str, SplitFeatures],
    folder: Path,
    seed: int,
) -> dict[str, Any]:
    """Draw the pictures of an evaluation into ``folder/pictures`` and TensorBoard
    (the run ``folder/tensorboard/eval``: each picture, and the projector's embedding of
    the test images with their class and thumbnail); returns ``{picture: file}`` relative to
    ``folder`` and what was not drawn, with why."""
    train, test = splits["train"], splits["test"]
    pictures = folder / PICTURES_DIR
    with writing(pictures):
        pictures.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Any] = {}
    found = embedding_map(test, seed)
    drawn["tsne"] = _write(pictures / "tsne.png", map_figure(found, labelled.classes), folder)
    queries = query_indices(test.labels, seed)
    nearest = nearest_train(train, test, queries, NEIGHBOURS)
    same = train.labels.numpy()[nearest] == test.labels.numpy()[queries][:, None]
    shown = labelled.shown(split_images(labelled, "test", queries))
    neighbours = labelled.shown(split_images(labelled, "train", nearest.reshape(-1)))
    grid = neighbour_grid(shown, neighbours.view(*nearest.shape, *neighbours.shape[1:]), same)
    drawn["neighbours"] = _write(pictures / "neighbours.png", png(grid), folder)
    vit = vit_pictures(model, split_images(labelled, "test", queries[:4]), labelled.shown)
    if vit is None:
        reason = "the backbone is not a ViT"
        drawn["not_drawn"] = {"attention": reason, "patch_pca": reason}
    else:
        drawn["attention"] = _write(pictures / "attention.png", vit.attention_png, folder)
        drawn["patch_pca"] = _write(pictures / "patch_pca.png", vit.pca_png, folder)
    _to_tensorboard(folder, drawn, labelled, test, found.indices)
    drawn["projector"] = f"{TENSORBOARD_DIR}/{EVAL_RUN}/projector_config.pbtxt"
    return drawn


def _write(path: Path, data: bytes, folder: Path) -> str:
    """Write a picture; its path relative to ``folder``."""
    write_output(path, data)
    return str(path.relative_to(folder))


def _to_tensorboard(
    folder: Path,
    drawn: dict[str, Any],
    labelled: LabelledData,
    test: SplitFeatures,
    indices: np.ndarray,
) -> None:
    """Each picture as an image, and the projector's embedding of the test images
    ``indices`` (backbone features, class names, thumbnails), in the TensorBoard run
    ``tensorboard/eval``: written beside it, then put in place of the previous one."""
    thumbnails = labelled.shown(split_images(labelled, "test", indices))
    thumbnails = F.interpolate(
        thumbnails, size=(THUMBNAIL, THUMBNAIL), mode="bilinear", antialias=True
    ).clamp(0, 1)
    names = labelled.classes
    board = folder / TENSORBOARD_DIR
    fresh = board / f".{EVAL_RUN}-{os.getpid()}"
    with writing(board):
        shutil.rmtree(fresh, ignore_errors=True)
        with SummaryWriter(str(fresh)) as writer:
            for name, relative in drawn.items():
                if isinstance(relative, str):
                    image = np.array(Image.open(folder / relative).convert("RGB"))
                    writer.add_image(f"eval/{name}", image, dataformats="HWC")
            # tensorboardX leaves the sprite's unused bottom rows uninitialised (and warns
            # as it converts them): they are blanked below.
            with np.errstate(over="ignore", invalid="ignore"):
                writer.add_embedding(
                    test.features[BACKBONE][torch.from_numpy(indices)],
                    metadata=[names[int(label)] for label in test.labels[indices]],
                    label_img=thumbnails,
                    tag=PROJECTOR_TAG,
                )
        _blank_unused_sprite_rows(fresh / "00000" / PROJECTOR_TAG / "sprite.png", len(indices))
        _replace_folder(board / EVAL_RUN, fresh)


def _blank_unused_sprite_rows(path: Path, count: int) -> None:
    """White below the last row of thumbnails in the projector's square sprite."""
    with Image.open(path) as sprite:
        pixels = np.array(sprite.convert("RGB"))
    per_row = -(-len(pixels) // THUMBNAIL)
    used = -(-count // per_row) * THUMBNAIL
    pixels[used:] = 255
    Image.fromarray(pixels).save(path)


def _replace_folder(target: Path, fresh: Path) -> None:
    """Put the folder ``fresh`` at ``target``, the previous one removed."""
    old = target.with_name(f".{target.name}-old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)

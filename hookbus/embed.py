"""Embeddings of image files from a trained encoder: ``hookbus embed`` and
:func:`embed_images`."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from tqdm import tqdm

from hookbus.embed_data import auto_workers, find_images, image_loader
from hookbus.embed_output import check_output, output_format, write_embeddings
from hookbus.embed_source import load_encoder
from hookbus.engine.errors import DataError, UserError
from hookbus.parts.data.transforms import clean_transform

DEVICES = ("auto", "cpu", "cuda")
"""The devices :func:`embed_images` takes; ``auto`` is CUDA when present, else the CPU."""


@dataclass(frozen=True)
class Embeddings:
    """The embeddings of image files: row ``i`` of ``embeddings`` (float32 ``[N, D]``, on
    the CPU) is the image at ``paths[i]``, encoded by the backbone of the checkpoint or
    exported file ``source``; ``seconds`` is the wall time of reading, transforming and
    encoding them on ``device``."""

    paths: list[str]
    embeddings: Tensor
    source: Path
    seconds: float
    device: str

    @property
    def images_per_second(self) -> float:
        """Images encoded per second of :attr:`seconds`."""
        return len(self.paths) / self.seconds if self.seconds > 0 else float("inf")


def embed_images(
    source: str | Path,
    images: str | Path | Sequence[str | Path],
    *,
    recipe: str | Path | None = None,
    batch_size: int = 64,
    image_size: int | None = None,
    device: str = "auto",
    num_workers: int | None = None,
    progress: bool = False,
) -> Embeddings:
    """The embeddings of ``images`` by the backbone of ``source``.

    ``source`` is a checkpoint, a run directory (its newest checkpoint) or an exported
    backbone (``hookbus export``) with ``recipe``, the recipe of its run (see
    :func:`hookbus.embed_source.load_encoder`). ``images`` is an image file or a folder,
    or a list of them: a folder stands for the image files under it, recursively, in
    sorted order. Each image is read as RGB, resized so its shorter side is
    ``image_size / 0.875``, center-cropped to ``image_size`` (default: the run's
    ``data.image_size``) and normalised with the run's ``data.torchvision.mean`` and
    ``std``: the evaluation view of the run's test images. Batches of ``batch_size`` are
    decoded in ``num_workers`` DataLoader workers (None: one per core but one, at most
    8) and encoded on ``device`` in eval mode under ``torch.inference_mode``; with
    ``progress``, a tqdm bar on stderr counts the images. A missing source, no image, a
    file that is not a readable image, or CUDA asked of a machine without it raise a
    :class:`~hookbus.engine.errors.UserError` naming it.

    Example::

        from hookbus import embed_images, save_embeddings

        result = embed_images("runs/simclr_photos", "photos/", batch_size=128)
        result.embeddings.shape        # torch.Size([N, D]), row i is result.paths[i]
        save_embeddings(result, "photos.npz")
    """
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, not {batch_size}")
    if image_size is not None and image_size < 1:
        raise UserError(f"image size must be at least 1 pixel, not {image_size}")
    if num_workers is not None and num_workers < 0:
        raise UserError(f"num_workers must be 0 or more, not {num_workers}")
    target = _device(device)
    encoder = load_encoder(source, recipe)
    files = find_images([images] if isinstance(images, str | Path) else images)
    trained = encoder.config.data.image_size
    size = trained if image_size is None else image_size
    loader = image_loader(
        files,
        clean_transform(encoder.config.data.torchvision, size),
        batch_size=batch_size,
        num_workers=auto_workers() if num_workers is None else num_workers,
        pin_memory=target.type == "cuda",
    )
    backbone = encoder.backbone.to(target)
    rows: list[Tensor] = []
    started = time.perf_counter()
    with (
        torch.inference_mode(),
        tqdm(
            total=len(files), unit="img", desc="embed", file=sys.stderr, disable=not progress
        ) as bar,
    ):
        for batch in loader:
            if isinstance(batch, str):
                raise DataError(batch)
            try:
                features = backbone(batch.to(target, non_blocking=True))
            except RuntimeError as exc:
                if size == trained:
                    raise
                raise UserError(
                    f"the backbone of {encoder.source} does not take {size}x{size} images "
                    f"(trained at {trained}): {str(exc).splitlines()[0]}"
                ) from None
            rows.append(features.flatten(1).float().cpu())
            bar.update(len(batch))
    seconds = time.perf_counter() - started
    paths = [str(path) for path in files]
    return Embeddings(paths, torch.cat(rows), encoder.source, seconds, str(target))


def save_embeddings(
    result: Embeddings,
    out: str | Path,
    *,
    format: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``result`` to ``out`` and return its path: ``format`` ``pt``, ``npz`` or
    ``csv`` (None: from the file name's ending), loaded in one line as::

        torch.load("emb.pt", weights_only=True)   # {"paths": [...], "embeddings": [N, D]}
        np.load("emb.npz")["embeddings"]          # and ["paths"]

    An existing file is refused unless ``overwrite``, and so are the source and a file a
    run keeps in its directory (see :func:`hookbus.embed_output.check_output`); the file
    is written through a temporary file and a rename, so it is never left half written.
    """
    path = Path(out)
    form = output_format(path, format)
    check_output(path, result.source, overwrite=overwrite)
    write_embeddings(result.paths, result.embeddings, path, form)
    return path


def _device(device: str) -> torch.device:
    """The torch device ``device`` (one of :data:`DEVICES`) names."""
    if device not in DEVICES:
        raise UserError(f"unknown device {device!r}: {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda: CUDA is not available on this machine; use cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)

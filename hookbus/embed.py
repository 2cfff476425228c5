"""Embeddings of image files from a trained encoder: ``hookbus embed`` and
:func:`embed_images`."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor
from tqdm import tqdm

from hookbus.embed_data import (
    SKIP_HINT,
    Batch,
    FoundImages,
    Skipped,
    auto_workers,
    find_images,
    image_loader,
)
from hookbus.embed_output import check_output, output_format, write_embeddings
from hookbus.embed_source import Encoder, load_encoder
from hookbus.engine.config import MAX_PIXELS
from hookbus.engine.errors import DataError, MachineFailure, UserError
from hookbus.parts.data.crop_boxes import CENTER_CROP_FRACTION
from hookbus.parts.data.transforms import clean_transform

DEVICES = ("auto", "cpu", "cuda")
"""The devices :func:`embed_images` takes; ``auto`` is CUDA when present, else the CPU."""

MAX_WORKERS = 256
"""The most DataLoader workers embed starts (as ``data.num_workers`` for training)."""


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
    skipped: list[Skipped] = field(default_factory=list)
    """The images left out with ``skip_unreadable``: each path and why."""
    inputs: list[Path] = field(default_factory=list)
    """The image files and folders as named: the output may not be one of them, nor
    inside one."""

    @property
    def images_per_second(self) -> float:
        """Images encoded per second of :attr:`seconds`."""
        return len(self.paths) / self.seconds if self.seconds > 0 else float("inf")


def embed_images(
    source: str | Path,
    images: str | Path | Sequence[str | Path] | FoundImages,
    *,
    recipe: str | Path | None = None,
    batch_size: int = 64,
    image_size: int | None = None,
    device: str = "auto",
    num_workers: int | None = None,
    progress: bool = False,
    skip_unreadable: bool = False,
) -> Embeddings:
    """The embeddings of ``images`` by the backbone of ``source``.

    ``source`` is a checkpoint, a run directory (its newest checkpoint) or an exported
    backbone (``hookbus export``) with ``recipe``, the recipe of its run (see
    :func:`hookbus.embed_source.load_encoder`). ``images`` is an image file or a folder,
    or a list of them, or what :func:`~hookbus.embed_data.find_images` found in them
    (whose walk already refused or listed what it could not use): a folder stands for
    the image files under it, recursively, in sorted order. Each image
    is read as RGB, resized so its shorter side is ``image_size / 0.875``,
    center-cropped to ``image_size`` (default: the run's ``data.image_size``; at most
    :data:`~hookbus.engine.config.MAX_PIXELS`) and normalised with the run's
    ``data.torchvision.mean`` and ``std``: the evaluation view of the run's test images.
    Batches of ``batch_size`` are decoded in ``num_workers`` DataLoader workers (None:
    one per core but one, at most 8; at most :data:`MAX_WORKERS`) and encoded on
    ``device`` in eval mode under ``torch.inference_mode``; with ``progress``, a tqdm bar
    on stderr counts the images.

    An image that cannot be used (a folder that cannot be listed, a link loop or a
    broken link, a FIFO named like an image, a file Pillow cannot read, a strip too
    long to resize) is a :class:`~hookbus.engine.errors.DataError` naming it; with
    ``skip_unreadable`` it is left out and listed in :attr:`Embeddings.skipped`, so the
    rows are never fewer than the images without a word. A missing source, no image, or
    CUDA asked of a machine without it raise a :class:`~hookbus.engine.errors.UserError`
    naming it; memory exhausted or a worker killed, a
    :class:`~hookbus.engine.errors.MachineFailure` saying what to lower.

    Example::

        from hookbus import embed_images, save_embeddings

        result = embed_images("runs/simclr_photos", "photos/", batch_size=128)
        result.embeddings.shape        # torch.Size([N, D]), row i is result.paths[i]
        save_embeddings(result, "photos.npz")
    """
    _check_settings(batch_size, image_size, num_workers)
    target = _device(device)
    encoder = load_encoder(source, recipe)
    found = (
        images
        if isinstance(images, FoundImages)
        else find_images(
            [images] if isinstance(images, str | Path) else images,
            skip_unreadable=skip_unreadable,
        )
    )
    trained = encoder.config.data.image_size
    size = trained if image_size is None else image_size
    _check_batch_memory(batch_size, size)
    loader = image_loader(
        found.files,
        clean_transform(encoder.config.data.torchvision, size),
        resize_to=round(size / CENTER_CROP_FRACTION),
        batch_size=batch_size,
        num_workers=auto_workers() if num_workers is None else num_workers,
        pin_memory=target.type == "cuda",
    )
    backbone = encoder.backbone.to(target)
    rows: list[Tensor] = []
    kept: list[int] = []
    skipped = list(found.skipped)
    started = time.perf_counter()
    with (
        torch.inference_mode(),
        tqdm(
            total=len(found.files),
            unit="img",
            desc="embed",
            file=sys.stderr,
            disable=not progress,
        ) as bar,
    ):
        for batch in _batches(loader):
            for index, message in batch.failures:
                if not skip_unreadable:
                    raise DataError(f"{message}: {SKIP_HINT}")
                skipped.append(Skipped(str(found.files[index]), message))
            if batch.images is not None:
                rows.append(_encode(backbone, batch.images, target, size, trained, encoder))
                kept += batch.indexes
            bar.update(len(batch.indexes) + len(batch.failures))
    seconds = time.perf_counter() - started
    if not rows:
        raise DataError(
            f"no image could be read: all {len(skipped)} skipped, the first: {skipped[0].reason}"
        )
    paths = [str(found.files[index]) for index in kept]
    return Embeddings(
        paths, torch.cat(rows), encoder.source, seconds, str(target), skipped, found.inputs
    )


def _check_settings(batch_size: int, image_size: int | None, num_workers: int | None) -> None:
    """Refuse sizes and worker counts embed cannot honour, before anything is read."""
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, not {batch_size}")
    if image_size is not None and not 1 <= image_size <= MAX_PIXELS:
        raise UserError(f"image size must be 1 to {MAX_PIXELS} pixels, not {image_size}")
    if num_workers is not None and not 0 <= num_workers <= MAX_WORKERS:
        raise UserError(f"num_workers must be 0 to {MAX_WORKERS}, not {num_workers}")


def _check_batch_memory(batch_size: int, size: int) -> None:
    """Refuse a batch of float images that would take over half the machine's memory."""
    needed = batch_size * 3 * size * size * 4
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if needed > memory // 2:
        raise UserError(
            f"a batch of {batch_size} images of {size}x{size} pixels takes "
            f"{needed / 2**30:.1f} GiB, over half of this machine's {memory / 2**30:.1f} GiB "
            "of memory: lower --batch-size or --image-size"
        )


def _batches(loader: Iterable[Batch]) -> Iterator[Batch]:
    """The loader's batches; a worker that died (killed for memory, a limit on
    processes) is a :class:`MachineFailure` in one line."""
    batches = iter(loader)
    while True:
        try:
            yield next(batches)
        except StopIteration:
            return
        except (RuntimeError, OSError) as exc:
            reason = " ".join(str(exc).split())[:200]
            raise MachineFailure(
                f"embed's image loading failed: {reason}; lower --num-workers or --batch-size"
            ) from None


def _encode(
    backbone: torch.nn.Module,
    images: Tensor,
    target: torch.device,
    size: int,
    trained: int,
    encoder: Encoder,
) -> Tensor:
    """The backbone's features of ``images``, flattened, float32 on the CPU."""
    try:
        features = backbone(images.to(target, non_blocking=True))
    except torch.OutOfMemoryError:
        raise MachineFailure(
            f"out of memory encoding a batch of {len(images)} images of {size}x{size} on "
            f"{target}: lower --batch-size"
        ) from None
    except RuntimeError as exc:
        if "allocate" in str(exc):
            raise MachineFailure(
                f"out of memory encoding a batch of {len(images)} images of {size}x{size} "
                f"on {target}: lower --batch-size"
            ) from None
        if size == trained:
            raise
        raise UserError(
            f"the backbone of {encoder.source} does not take {size}x{size} images "
            f"(trained at {trained}): {str(exc).splitlines()[0]}"
        ) from None
    return features.flatten(1).float().cpu()


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

    An existing file is refused unless ``overwrite``, and so are the source, an input
    image, a path inside an input folder and a file a run keeps in its directory (see
    :func:`hookbus.embed_output.check_output`); the file is written through a temporary
    file, fsynced and renamed, so it is never left half written: a full disk is an
    :class:`~hookbus.engine.errors.OutputWriteError`, the file left as it was.
    """
    path = Path(out)
    form = output_format(path, format)
    files = [Path(name) for name in (*result.paths, *(s.path for s in result.skipped))]
    check_output(path, result.source, inputs=result.inputs, files=files, overwrite=overwrite)
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

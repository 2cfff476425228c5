"""The images ``hookbus embed`` reads: files found under folders (by the kernel's folder
walk), decoded and given the evaluation transform in DataLoader workers, in order; an
image that cannot be used is refused in one line, or skipped and listed when asked."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from hookbus.engine.errors import DataError
from hookbus.engine.folder_walk import walk_folder
from hookbus.parts.data.image_folder import IMAGE_EXTENSIONS, read_image
from hookbus.parts.data.loader import SSLDataLoader

MAX_AUTO_WORKERS = 8
"""The most DataLoader workers ``num_workers=None`` starts."""

MAX_RESIZED_PIXELS = 1 << 26
"""The most pixels an image may have once resized for its center crop (64 Mi, 192 MiB
of uint8 RGB): a 1 x 60000 strip resized to 37 px on its shorter side would be 2.2 G
pixels, which is refused naming the image instead of exhausting a worker's memory."""

SKIP_HINT = "give --skip-unreadable (skip_unreadable=True) to embed the others and list these"
"""How to go on without the images that cannot be used, in the line refusing them."""


class Skipped(NamedTuple):
    """An image left out by ``skip_unreadable``: its path and why, in one line."""

    path: str
    reason: str


@dataclass(frozen=True)
class FoundImages:
    """What :func:`find_images` found: the image ``files`` in order, the ``inputs`` as
    named (files and folders) and, with ``skip_unreadable``, the entries ``skipped``."""

    files: list[Path]
    inputs: list[Path]
    skipped: list[Skipped]


def find_images(sources: Sequence[str | Path], *, skip_unreadable: bool = False) -> FoundImages:
    """The image files of ``sources``, in their order: a folder gives the files under it
    whose names end with one of :data:`IMAGE_EXTENSIONS` (any case, recursively, sorted
    by path, linked folders followed once, names starting with a dot left out: see
    :func:`hookbus.engine.folder_walk.walk_folder`), a file is taken as it is. A missing
    source, or a folder without an image, is a :class:`DataError` naming it. An entry the
    walk cannot use (a folder that cannot be listed, a symbolic link loop, a folder
    reached twice through a link, a broken link, a FIFO or device named like an image, a
    file that cannot be read) is a :class:`DataError` naming it, or, with
    ``skip_unreadable``, listed in :attr:`FoundImages.skipped`."""
    if not sources:
        raise DataError("no images given: name image files or folders of images")
    files: list[Path] = []
    skipped: list[Skipped] = []
    inputs = list(map(Path, sources))
    for source in inputs:
        if not source.is_dir():
            if not source.exists():
                raise DataError(f"image file or folder not found: {source}")
            files.append(source)
            continue
        walk = walk_folder(source, suffixes=IMAGE_EXTENSIONS, what="image", error=DataError)
        if walk.problems and not skip_unreadable:
            first, more = walk.problems[0], len(walk.problems) - 1
            others = f" (and {more} more under {source})" if more else ""
            raise DataError(f"{first.message}{others}: {SKIP_HINT}")
        skipped += [Skipped(str(problem.path), problem.message) for problem in walk.problems]
        if not walk.files and not walk.problems:
            raise DataError(f"no images in {source} (extensions: {', '.join(IMAGE_EXTENSIONS)})")
        files += walk.files
    if not files:
        raise DataError(
            f"no image could be read: all {len(skipped)} skipped, the first: {skipped[0].reason}"
        )
    return FoundImages(files, inputs, skipped)


class ImageFiles(Dataset):
    """``files`` through ``transform``: item ``i`` is ``(i, image)``, the float image
    ``[3, S, S]`` of file ``i``, or ``(i, message)`` naming the file when it cannot be
    read as an image or resized (the embedding loop refuses or skips it in the main
    process, as one line, not as a worker's traceback)."""

    def __init__(self, files: Sequence[Path], transform: v2.Compose, resize_to: int) -> None:
        self.files = list(files)
        self.transform = transform
        self.resize_to = resize_to

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[int, Tensor | str]:
        path = self.files[index]
        try:
            image = read_image(path)
        except DataError as exc:
            return index, str(exc)
        height, width = image.shape[-2:]
        short, long = sorted((height, width))
        resized = self.resize_to * max(1, round(long * self.resize_to / short))
        if resized > MAX_RESIZED_PIXELS:
            return index, (
                f"cannot embed image {path}: it is {width}x{height} pixels, which resized to "
                f"{self.resize_to} on its shorter side is {resized} pixels, over the "
                f"{MAX_RESIZED_PIXELS} embed takes; crop it"
            )
        try:
            return index, self.transform(image)
        except (RuntimeError, ValueError, MemoryError) as exc:
            reason = " ".join(str(exc).split())[:200]
            return index, f"cannot embed image {path} ({width}x{height} pixels): {reason}"


class Batch(NamedTuple):
    """A batch of :class:`ImageFiles`: the images that could be read (``[B, 3, S, S]``,
    None when none could) with their file indexes, and ``(index, message)`` of those
    that could not."""

    indexes: list[int]
    images: Tensor | None
    failures: list[tuple[int, str]]


def _collate(items: list[tuple[int, Tensor | str]]) -> Batch:
    """The :class:`Batch` of ``items``, in their order."""
    good = [(index, item) for index, item in items if isinstance(item, Tensor)]
    failures = [(index, item) for index, item in items if isinstance(item, str)]
    images = torch.stack([image for _, image in good]) if good else None
    return Batch([index for index, _ in good], images, failures)


def auto_workers() -> int:
    """DataLoader workers from the cores this process may use: one core is left to the
    forward pass, at most :data:`MAX_AUTO_WORKERS`, 0 on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_AUTO_WORKERS, max(0, (cores or 1) - 1))


def image_loader(
    files: Sequence[Path],
    transform: v2.Compose,
    *,
    resize_to: int,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
) -> DataLoader:
    """A loader of :class:`Batch` es of ``files`` in order, ``batch_size`` at a time, the
    last batch smaller; decoding and ``transform`` (which resizes the shorter side to
    ``resize_to``) run in ``num_workers`` worker processes (none: in this process, on
    one torch thread)."""
    return SSLDataLoader(
        ImageFiles(files, transform, resize_to),
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=_collate,
        pin_memory=pin_memory,
    )

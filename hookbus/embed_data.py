"""The images ``hookbus embed`` reads: files found under folders, decoded and given the
evaluation transform in DataLoader workers, in order."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from hookbus.engine.errors import DataError
from hookbus.parts.data.image_folder import IMAGE_EXTENSIONS, read_image
from hookbus.parts.data.loader import SSLDataLoader

MAX_AUTO_WORKERS = 8
"""The most DataLoader workers ``num_workers=None`` starts."""


def find_images(sources: Sequence[str | Path]) -> list[Path]:
    """The image files of ``sources``, in their order: a folder gives the files under it
    whose names end with one of :data:`IMAGE_EXTENSIONS` (any case, recursively, sorted
    by path), a file is taken as it is. A missing source, or a folder without an image,
    is a :class:`DataError` naming it."""
    if not sources:
        raise DataError("no images given: name image files or folders of images")
    files: list[Path] = []
    for source in map(Path, sources):
        if source.is_dir():
            found = sorted(
                path
                for path in source.rglob("*")
                if path.suffix.lower() in IMAGE_EXTENSIONS and path.is_file()
            )
            if not found:
                raise DataError(
                    f"no images in {source} (extensions: {', '.join(IMAGE_EXTENSIONS)})"
                )
            files += found
        elif source.is_file():
            files.append(source)
        else:
            raise DataError(f"image file or folder not found: {source}")
    return files


class ImageFiles(Dataset):
    """``files`` through ``transform``: item ``i`` is the float image ``[3, S, S]`` of file
    ``i``, or, when the file cannot be read as an image, the message naming it (the
    embedding loop raises it in the main process, as one line, not as a worker's
    traceback)."""

    def __init__(self, files: Sequence[Path], transform: v2.Compose) -> None:
        self.files = list(files)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Tensor | str:
        try:
            return self.transform(read_image(self.files[index]))
        except DataError as exc:
            return str(exc)


def _stack(items: list[Tensor | str]) -> Tensor | str:
    """The batch of images, or the first message of a file that could not be read."""
    for item in items:
        if isinstance(item, str):
            return item
    return torch.stack(items)  # type: ignore[arg-type]


def auto_workers() -> int:
    """DataLoader workers from the cores this process may use: one core is left to the
    forward pass, at most :data:`MAX_AUTO_WORKERS`, 0 on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_AUTO_WORKERS, max(0, (cores or 1) - 1))


def image_loader(
    files: Sequence[Path],
    transform: v2.Compose,
    *,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
) -> DataLoader:
    """A loader of ``files`` in order, ``batch_size`` at a time, the last batch smaller;
    decoding and ``transform`` run in ``num_workers`` worker processes (none: in this
    process, on one torch thread)."""
    return SSLDataLoader(
        ImageFiles(files, transform),
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=_stack,
        pin_memory=pin_memory,
    )

"""Images read with Pillow from a folder of class folders, or from a flat folder."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image, UnidentifiedImageError
from torch import Tensor
from torch.utils.data import Dataset

from hookbus.engine.bounded_files import MAX_IMAGE_BYTES, check_regular
from hookbus.engine.errors import DataError
from hookbus.parts.data.pil_image import pil_to_tensor

IMAGE_EXTENSIONS = (
    ".bmp",
    ".gif",
    ".jpeg",
    ".jpg",
    ".pgm",
    ".png",
    ".ppm",
    ".tif",
    ".tiff",
    ".webp",
)
"""File name endings (case-insensitive) read as images; other files are ignored."""

UNLABELLED = -1
"""The label of the images of a flat folder."""


NOT_AN_IMAGE = "not an image file Pillow can identify"
"""What a file Pillow finds no image format in is, in the error naming it."""


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder``, sorted by name; DataError naming a folder that cannot
    be listed (no permission, gone), which is never taken for an empty one."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError as exc:
        raise DataError(f"cannot list image folder {folder}: {exc.strerror or exc}") from None


def _image_files(folder: Path, seen: set[str] | None = None) -> list[Path]:
    """Image files under ``folder`` (recursively, symbolic links followed), sorted.

    A file named like an image that is not one hookbus can read is an error naming it,
    never left out: a broken symbolic link, a FIFO, a device. So is a folder that
    cannot be listed, or one reached twice (a symbolic link loop).
    """
    seen = set() if seen is None else seen
    real = os.path.realpath(folder)
    if real in seen:
        raise DataError(f"image folder {folder} is reached twice (a symbolic link loop?)")
    seen.add(real)
    files: list[Path] = []
    for entry in _entries(folder):
        path = Path(entry.path)
        if entry.is_dir():
            files += _image_files(path, seen)
        elif path.suffix.lower() not in IMAGE_EXTENSIONS:
            continue
        elif entry.is_file():
            files.append(path)
        elif entry.is_symlink() and not path.exists():
            raise DataError(f"image {path} is a broken symbolic link (to {os.readlink(path)})")
        else:
            raise DataError(f"image {path} is not a regular file: hookbus reads only those")
    return files


class ImageFolderDataset(Dataset):
    """The images under ``root``; item ``i`` is ``(uint8 RGB image [3, H, W], label, i)``.

    ``root`` is either a folder of class folders (``root/<class>/**/<image>``; the
    classes are the sorted folder names, labels their positions) or a flat folder of
    images (label :data:`UNLABELLED` for all; for methods that need no labels). A
    folder holding both class folders and images directly is refused. ``classes``
    fixes the class list (a test folder takes the train folder's); a class folder
    not in it is an error. Images are decoded when read: a file Pillow cannot read
    raises :class:`hookbus.engine.errors.DataError` naming it. With ``decode=False``
    item ``i`` holds the file's path instead, for a collate function that decodes
    each image at the size its crops need (``data.pipeline: crop_first``).
    """

    def __init__(self, root: Path, classes: list[str] | None = None, decode: bool = True) -> None:
        root = Path(root)
        if not root.is_dir():
            raise DataError(f"image folder not found: {root}")
        entries = _entries(root)
        folders = [Path(entry.path) for entry in entries if entry.is_dir()]
        loose = [
            Path(entry.path)
            for entry in entries
            if not entry.is_dir() and Path(entry.name).suffix.lower() in IMAGE_EXTENSIONS
        ]
        if folders and loose:
            raise DataError(
                f"{root} holds both class folders and images ({loose[0].name}, ...): put every "
                "image in a class folder, or use a flat folder of images"
            )
        samples: list[tuple[Path, int]] = []
        if folders:
            self.classes = [folder.name for folder in folders] if classes is None else classes
            for folder in folders:
                if folder.name not in self.classes:
                    raise DataError(
                        f"class folder {folder} is not a class of the train folder "
                        f"({', '.join(self.classes)})"
                    )
                label = self.classes.index(folder.name)
                images = _image_files(folder)
                if not images:
                    raise DataError(
                        f"class folder {folder} holds no images (extensions: "
                        f"{', '.join(IMAGE_EXTENSIONS)}): remove it, or add its images"
                    )
                samples += [(path, label) for path in images]
        else:
            self.classes = []
            samples = [(path, UNLABELLED) for path in _image_files(root)]
        if not samples:
            raise DataError(f"no images in {root} (extensions: {', '.join(IMAGE_EXTENSIONS)})")
        self.root = root
        self.samples = samples
        self.decode = decode

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Tensor | Path, int, int]:
        path, label = self.samples[index]
        return (read_image(path) if self.decode else path), label, index


def read_image(path: Path) -> Tensor:
    """The image at ``path`` as a uint8 RGB tensor ``[3, H, W]``; DataError if unreadable
    or not a regular file within :data:`~hookbus.engine.bounded_files.MAX_IMAGE_BYTES`."""
    check_regular(path, "image", limit=MAX_IMAGE_BYTES, error=DataError)
    try:
        with Image.open(path) as image:
            return pil_to_tensor(image.convert("RGB"))
    except UnidentifiedImageError:
        raise DataError(f"cannot read image {path}: {NOT_AN_IMAGE}") from None
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as exc:
        raise DataError(f"cannot read image {path}: {exc}") from None

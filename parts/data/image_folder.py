"""Images read with Pillow from a folder of class folders, or from a flat folder."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
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


def _image_files(folder: Path) -> list[Path]:
    """Image files under ``folder`` (recursively), sorted."""
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and path.suffix.lower() in IMAGE_EXTENSIONS
    )


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
        folders = sorted(path for path in root.iterdir() if path.is_dir())
        loose = [p for p in root.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
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
                samples += [(path, label) for path in _image_files(folder)]
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
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(f"cannot read image {path}: {exc}") from None

"""The images under a folder, read with Pillow: unlabelled, or labelled by class folders."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from torch import Tensor
from torch.utils.data import Dataset

from hookbus.engine.errors import DataError
from hookbus.engine.folder_walk import FolderWalk, walk_folder
from hookbus.parts.data.image_decode import NOT_AN_IMAGE, read_image
from hookbus.parts.data.unreadable import Unreadable

__all__ = ["IMAGE_EXTENSIONS", "NOT_AN_IMAGE", "UNLABELLED", "ImageFolderDataset", "read_image"]

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
"""The label of the images of a folder read without labels."""

Labels = Literal["none", "class_folders"]
"""How a folder's images are labelled (``data.folder.labels``)."""


def walk_images(root: Path) -> FolderWalk:
    """Every image file under ``root``, recursively (see
    :func:`~hookbus.engine.folder_walk.walk_folder`): files named with one of
    :data:`IMAGE_EXTENSIONS`, hidden names left out. A missing root, or one that is not
    a folder, is a :class:`DataError`; the walk's problems (a symbolic link loop, a
    broken link, a FIFO named like an image...) are the caller's to refuse or skip."""
    return walk_folder(root, suffixes=IMAGE_EXTENSIONS, what="image", error=DataError)


class ImageFolderDataset(Dataset):
    """The images under ``root``; item ``i`` is ``(uint8 RGB image [3, H, W], label, i)``.

    ``labels`` ``none`` (the default of ``data.folder.labels``): every image under
    ``root``, recursively (loose images beside folders, a photo dump's year and trip
    folders), label :data:`UNLABELLED` for all. ``class_folders``: the folders directly
    in ``root`` are the classes (sorted names, labels their positions), each holding its
    images at any depth; an image directly in ``root`` is refused, so is a class folder
    without one. None (callers from Python that name none, such as ``hookbus shard``):
    the folder's layout decides, ``class_folders`` when it holds folders and no image
    directly, else ``none``. ``classes`` fixes the class list (a test folder takes the
    train folder's); a class folder not in it is an error.

    The folder is walked once (:func:`walk_images`); anything the walk cannot use (a
    symbolic link loop, a broken link, a FIFO named like an image, a folder that cannot
    be listed) is refused in one line naming it. Images are decoded when read, upright
    and in 8-bit RGB (:func:`~hookbus.parts.data.image_decode.read_image`): a file that
    cannot be read raises :class:`hookbus.engine.errors.DataError` naming it, or with
    ``skip_unreadable`` is an :class:`~hookbus.parts.data.unreadable.Unreadable` holding
    that line, for the collate function to skip. With ``decode=False`` item ``i`` holds
    the file's path instead, for a collate function that decodes each image at the size
    its crops need (``data.pipeline: crop_first``).
    """

    def __init__(
        self,
        root: Path,
        classes: list[str] | None = None,
        decode: bool = True,
        labels: Labels | None = None,
        skip_unreadable: bool = False,
    ) -> None:
        root = Path(root)
        walk = walk_images(root)
        walk.refuse_problems(DataError)
        if labels is None:
            labels = _layout(walk)
        if labels == "class_folders":
            self.classes, samples = _by_class_folder(walk, classes)
        else:
            self.classes = []
            samples = [(path, UNLABELLED) for path in walk.files]
        if not samples:
            raise DataError(f"no images in {root} (extensions: {', '.join(IMAGE_EXTENSIONS)})")
        self.root = root
        self.samples = samples
        self.decode = decode
        self.skip_unreadable = skip_unreadable

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Tensor | Path | Unreadable, int, int]:
        path, label = self.samples[index]
        if not self.decode:
            return path, label, index
        try:
            return read_image(path), label, index
        except DataError as exc:
            if not self.skip_unreadable:
                raise
            return Unreadable(str(exc)), label, index


def _layout(walk: FolderWalk) -> Labels:
    """``class_folders`` when the walked root holds folders and no image directly."""
    root = walk.root
    has_folders = any(folder.parent == root for folder in walk.folders)
    loose = any(path.parent == root for path in walk.files)
    return "class_folders" if has_folders and not loose else "none"


def _by_class_folder(
    walk: FolderWalk, classes: list[str] | None
) -> tuple[list[str], list[tuple[Path, int]]]:
    """The class list and the labelled images of a walk of class folders."""
    root = walk.root
    folders = [folder for folder in walk.folders if folder.parent == root and folder != root]
    loose = [path for path in walk.files if path.parent == root]
    if loose and not folders:
        raise DataError(
            f"{root} holds no class folders, so its images have no labels: put the images "
            "of each class in a folder of its own (or, to train without labels, read it "
            "with data.folder.labels: none)"
        )
    if loose:
        raise DataError(
            f"{root} holds images beside its class folders ({loose[0].name}, ...), which "
            "would have no label: put every image in a class folder (or, to train without "
            "labels, read it with data.folder.labels: none)"
        )
    names = [folder.name for folder in folders] if classes is None else classes
    by_name: dict[str, list[tuple[Path, int]]] = {folder.name: [] for folder in folders}
    for folder in folders:
        if folder.name not in names:
            raise DataError(
                f"class folder {folder} is not a class of the train folder ({', '.join(names)})"
            )
    for path in walk.files:
        name = path.relative_to(root).parts[0]
        by_name[name].append((path, names.index(name)))
    samples: list[tuple[Path, int]] = []
    for folder in folders:
        if not by_name[folder.name]:
            raise DataError(
                f"class folder {folder} holds no images (extensions: "
                f"{', '.join(IMAGE_EXTENSIONS)}): remove it, or add its images"
            )
        samples += by_name[folder.name]
    return names, samples

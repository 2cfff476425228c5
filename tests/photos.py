"""A small labelled folder of real photographs, for tests and the docs' walk-through.

The two photographs that ship with scikit-learn (``sklearn.datasets.load_sample_images``:
china.jpg, a temple, and flower.jpg, a flower) are the two classes; each image of the folder
is a random crop of its class's photograph (random position, scale and aspect, flipped at
random), resized and saved as a JPEG. Nothing is generated noise, and nothing is
downloaded: the photographs are in the installed package.

    make_photo_folder(tmp_path / "photos", per_class=16, size=48)

writes ``photos/train/{china,flower}/000.jpg ...`` and ``photos/test/{china,flower}/...``
(disjoint random crops, the same counts), the layout of ``data.folder.train_dir`` and
``data.folder.test_dir``. The same arguments give the same files.

Run as a script it builds a folder for the quickstart's walk-through:
``python tests/photos.py photos --per-class 60 --size 96``.
"""

from __future__ import annotations

import argparse
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from PIL import Image

CLASSES = ("china", "flower")
"""The class folders, one per photograph of ``load_sample_images()``."""

SPLITS = ("train", "test")
"""The split folders under the root."""

_SCALE = (0.15, 0.6)
"""Range of a crop's area, as a fraction of its photograph's."""

_ASPECT = (3 / 4, 4 / 3)
"""Range of a crop's width / height."""


@cache
def _photographs() -> dict[str, Image.Image]:
    """The photographs of ``load_sample_images()`` by class name (427x640 RGB each), read
    from scikit-learn's package folder without importing scikit-learn (seconds saved)."""
    spec = find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the photo folder needs scikit-learn (pip install scikit-learn)")
    images = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "images"
    return {name: Image.open(images / f"{name}.jpg").convert("RGB") for name in CLASSES}


def photograph(name: str) -> Image.Image:
    """The photograph ``name`` (one of :data:`CLASSES`) of ``load_sample_images()``, RGB."""
    return _photographs()[name].copy()


def random_crop(photo: Image.Image, size: int, rng: np.random.Generator) -> Image.Image:
    """A crop of ``photo`` at a random scale, aspect and position, flipped left-right
    half of the time, resized so its shorter side is ``size``."""
    width, height = photo.size
    area = width * height * rng.uniform(*_SCALE)
    aspect = float(np.exp(rng.uniform(*np.log(_ASPECT))))
    crop_w = min(width, round((area * aspect) ** 0.5))
    crop_h = min(height, round((area / aspect) ** 0.5))
    left = int(rng.integers(0, width - crop_w + 1))
    top = int(rng.integers(0, height - crop_h + 1))
    crop = photo.crop((left, top, left + crop_w, top + crop_h))
    if rng.random() < 0.5:
        crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    short = min(crop_w, crop_h)
    return crop.resize(
        (round(crop_w * size / short), round(crop_h * size / short)), Image.Resampling.BILINEAR
    )


def make_photo_folder(root: Path, *, per_class: int, size: int, seed: int = 0) -> Path:
    """Write ``per_class`` JPEG crops of each photograph into ``root/train/<class>/`` and
    as many other crops into ``root/test/<class>/``, shorter side ``size`` pixels, and
    return ``root``. The images are the same for the same ``per_class``, ``size`` and
    ``seed``; train and test crops come from separate random streams."""
    if per_class < 1 or size < 8:
        raise ValueError(f"per_class must be >= 1 and size >= 8, not {per_class} and {size}")
    root = Path(root)
    for split_index, split in enumerate(SPLITS):
        for class_index, (name, photo) in enumerate(_photographs().items()):
            rng = np.random.default_rng([seed, split_index, class_index])
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(per_class):
                random_crop(photo, size, rng).save(folder / f"{index:03d}.jpg", quality=90)
    return root


def main() -> None:
    """Build a photo folder from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder to write (train/ and test/ inside)")
    parser.add_argument("--per-class", type=int, default=60, help="images per class and split")
    parser.add_argument("--size", type=int, default=96, help="shorter side of each image")
    parser.add_argument("--seed", type=int, default=0, help="seed of the crops")
    args = parser.parse_args()
    root = make_photo_folder(args.root, per_class=args.per_class, size=args.size, seed=args.seed)
    print(f"{root}: {args.per_class} images per class in train/ and test/ ({', '.join(CLASSES)})")


if __name__ == "__main__":
    main()

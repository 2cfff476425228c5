"""A labelled folder of 1,000 real photographs for the evaluation benchmarks: crops of
eight photographs that ship with scikit-learn (``china``, ``flower``) and scikit-image
(``astronaut``, ``chelsea``, ``coffee``, ``rocket``, ``motorcycle_left``,
``hubble_deep_field``), one class per photograph, 100 train and 25 test crops of each
(random position, scale 15-60% of the photograph, aspect 3/4-4/3, flipped half of the
time), saved as JPEG files. Nothing is downloaded: the photographs are files of the
installed packages.

    write_folder(Path("photos"), size=96)   # photos/train/<photo>/000.jpg, photos/test/...
"""

from __future__ import annotations

from functools import cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from PIL import Image

from tests.photos import random_crop

SKIMAGE_PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "motorcycle_left",
    "hubble_deep_field",
)
"""scikit-image's colour photographs (``skimage.data``), read from the files in the
installed package (nothing is downloaded)."""

SKLEARN_PHOTOS = ("china", "flower")
"""scikit-learn's two sample photographs (``load_sample_images``)."""

PER_CLASS = {"train": 100, "test": 25}
"""Crops of each photograph in each split: 8 x 125 = 1,000 images."""


@cache
def photographs() -> dict[str, Image.Image]:
    """The eight photographs by name, RGB."""
    skimage = find_spec("skimage")
    if skimage is None or not skimage.submodule_search_locations:
        raise SystemExit("bench_eval needs scikit-image's photographs: pip install -e .[bench]")
    from sklearn.datasets import load_sample_images

    sample = load_sample_images()
    found = {
        Path(name).stem: Image.fromarray(image)
        for name, image in zip(sample.filenames, sample.images, strict=True)
    }
    files = Path(next(iter(skimage.submodule_search_locations))) / "data"
    for name in SKIMAGE_PHOTOS:
        (path,) = [
            files / f"{name}{suffix}"
            for suffix in (".png", ".jpg")
            if (files / f"{name}{suffix}").is_file()
        ]
        found[name] = Image.open(path).convert("RGB")
    return {name: found[name] for name in SKLEARN_PHOTOS + SKIMAGE_PHOTOS}


def write_folder(root: Path, size: int) -> Path:
    """The labelled folder of 1,000 crops under ``root`` (``train/`` and ``test/``, one
    folder per photograph), the same files for the same ``size``."""
    for split_index, (split, count) in enumerate(PER_CLASS.items()):
        for class_index, (name, photo) in enumerate(photographs().items()):
            rng = np.random.default_rng([split_index, class_index])
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(count):
                random_crop(photo, size, rng).save(folder / f"{index:03d}.jpg", quality=90)
    return root

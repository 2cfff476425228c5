"""The data sets (digits, synthetic, image folders) and the registry that names them."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor
from torch.utils.data import Dataset

from hookbus.engine.config import DataConfig
from hookbus.engine.errors import ConfigError
from hookbus.engine.process import distributed
from hookbus.engine.registry import Registry
from hookbus.parts.data.digits import load_digits_split
from hookbus.parts.data.image_folder import ImageFolderDataset
from hookbus.parts.data.small_images import warn_small_images
from hookbus.parts.data.synthetic import SYNTHETIC_SEED, make_synthetic_images

DIGITS_SPLIT_SEED = 0
"""The digits train/test split is fixed, whatever the run's seed."""


class TensorImageDataset(Dataset):
    """Images ``[N, C, S, S]`` and labels ``[N]``; item ``i`` is ``(image, label, i)``."""

    def __init__(self, images: Tensor, labels: Tensor) -> None:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        self.images = images
        self.labels = labels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor, int]:
        return self.images[index], self.labels[index], index


DatasetBuilder = Callable[[DataConfig], tuple[Dataset, Dataset]]

DATASETS: Registry[DatasetBuilder] = Registry("data set")
"""Builders ``(cfg.data) -> (train set, test set)``, chosen by ``data.name``."""


@DATASETS.register("digits")
def build_digits(cfg: DataConfig) -> tuple[Dataset, Dataset]:
    """The scikit-learn digits at ``cfg.image_size``, with ``cfg.test_size`` test images."""
    split = load_digits_split(cfg.image_size, cfg.test_size, DIGITS_SPLIT_SEED)
    return (
        TensorImageDataset(split.train_images, split.train_labels),
        TensorImageDataset(split.test_images, split.test_labels),
    )


@DATASETS.register("synthetic")
def build_synthetic(cfg: DataConfig) -> tuple[Dataset, Dataset]:
    """Generated stripe images (:func:`hookbus.parts.data.synthetic.make_synthetic_images`) at
    ``cfg.image_size``, sized by ``cfg.synthetic``; the same images in every run."""
    generator = torch.Generator().manual_seed(SYNTHETIC_SEED)
    synthetic = cfg.synthetic
    train = make_synthetic_images(synthetic, synthetic.train_size, cfg.image_size, generator)
    test = make_synthetic_images(synthetic, synthetic.test_size, cfg.image_size, generator)
    return TensorImageDataset(*train), TensorImageDataset(*test)


@DATASETS.register("image_folder")
def build_image_folder(cfg: DataConfig) -> tuple[Dataset, Dataset]:
    """:class:`ImageFolderDataset` of ``data.folder.train_dir`` and ``test_dir`` (the
    train folder again when unset; its class list in either case), labelled as
    ``data.folder.labels`` says; images smaller than ``data.image_size`` are counted in
    one warning line for each folder (on the first rank). With
    ``data.pipeline: crop_first`` the items hold the files' paths: the collate
    function decodes them."""
    folder = cfg.folder
    if folder.train_dir is None:
        raise ConfigError("data.folder.train_dir: data.name image_folder needs a folder")
    decode = cfg.pipeline != "crop_first"
    read = partial(
        ImageFolderDataset,
        decode=decode,
        labels=folder.labels,
        skip_unreadable=folder.skip_unreadable,
    )
    train = read(folder.train_dir)
    test = train if folder.test_dir is None else read(folder.test_dir, train.classes or None)
    if distributed.rank() == 0:
        for images in dict.fromkeys((train, test)):
            warn_small_images([path for path, _ in images.samples], cfg.image_size, images.root)
    return train, test


SHARDS_EXTRA = "pip install 'hookbus[shards]'"


def require_streaming(what: str) -> None:
    """Refuse ``what`` with a :class:`ConfigError` naming the extra when the streaming
    library (MosaicML ``streaming``, the optional extra ``shards``) is not installed."""
    if importlib.util.find_spec("streaming") is None:
        raise ConfigError(
            f"{what} needs the streaming library, the optional extra shards: {SHARDS_EXTRA}"
        )


@DATASETS.register("shards")
def build_shards(cfg: DataConfig) -> tuple[Dataset, Dataset]:
    """:class:`~hookbus.parts.data.shards.ShardDataset` of ``data.shards.path`` (a folder
    written by ``hookbus shard``, or an s3:// URL of one) and ``test_path`` (the train
    shards again when unset). With ``data.pipeline: crop_first`` the items hold the
    image files' bytes: the collate function decodes them."""
    require_streaming("data.name shards")
    if cfg.pipeline == "batch":
        raise ConfigError(
            "data.name shards needs data.pipeline: crop_first or torchvision (its images "
            "differ in size, so each is cropped on its own)"
        )
    shards = cfg.shards
    if shards.path is None:
        raise ConfigError("data.shards.path: data.name shards needs the shards' folder or URL")
    # Loaded here, not at the top: the streaming library is an optional extra.
    from hookbus.parts.data.shards import build_shards as build

    return build(shards.path, shards.test_path, shards.cache_dir, cfg.pipeline != "crop_first")

"""In-memory image data sets and the registry the trainer picks them from by name."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor
from torch.utils.data import Dataset

from engine.config import DataConfig
from engine.data.digits import load_digits_split
from engine.registry import Registry

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

"""Image data: data sets, batched augmentations, collate, sampler and loaders."""

from __future__ import annotations

from engine.data.augment import BatchAugment
from engine.data.build import build_data_loaders, collates, set_loader_epoch
from engine.data.collate import Batch, ViewCollate
from engine.data.datasets import DATASETS, TensorImageDataset, build_digits
from engine.data.digits import ImageSplit, load_digits_split
from engine.data.image_folder import ImageFolderDataset
from engine.data.sampler import PhaseSampler
from engine.data.seeding import mix_seed
from engine.data.transform_collate import TransformCollate

__all__ = [
    "DATASETS",
    "Batch",
    "BatchAugment",
    "ImageFolderDataset",
    "ImageSplit",
    "PhaseSampler",
    "TensorImageDataset",
    "TransformCollate",
    "ViewCollate",
    "build_data_loaders",
    "build_digits",
    "collates",
    "load_digits_split",
    "mix_seed",
    "set_loader_epoch",
]

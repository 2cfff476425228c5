"""Image data: data sets, batched augmentations, collate, sampler and loaders.

The pipelines of image files (``data.pipeline`` ``crop_first`` and ``torchvision``) live
in :mod:`~hookbus.parts.data.crop_collate` and :mod:`~hookbus.parts.data.transforms`,
loaded when such a pipeline is built: they import torchvision (about a second), which a
run on tensors (the digits, synthetic data) never needs.
"""

from __future__ import annotations

from hookbus.parts.data.augment import BatchAugment
from hookbus.parts.data.build import build_data_loaders, collates, set_loader_epoch
from hookbus.parts.data.collate import Batch, ViewCollate
from hookbus.parts.data.datasets import DATASETS, TensorImageDataset, build_digits
from hookbus.parts.data.digits import ImageSplit, load_digits_split
from hookbus.parts.data.image_folder import ImageFolderDataset
from hookbus.parts.data.photometric import finish_views
from hookbus.parts.data.sampler import PhaseSampler
from hookbus.parts.data.seeding import mix_seed
from hookbus.parts.data.transform_collate import TransformCollate

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
    "finish_views",
    "load_digits_split",
    "mix_seed",
    "set_loader_epoch",
]

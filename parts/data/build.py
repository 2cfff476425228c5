"""Build the train, test and memory DataLoaders of a run from its config."""

from __future__ import annotations

import os
import signal
from collections.abc import Sized
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.utils.data import DataLoader, Dataset

from hookbus.parts.config import Config
from hookbus.parts.data.augment import BatchAugment
from hookbus.parts.data.collate import ViewCollate
from hookbus.parts.data.datasets import DATASETS
from hookbus.parts.data.ijepa_masks import BlockMaskCollate, block_settings, check_drawable
from hookbus.parts.data.loader import SSLDataLoader
from hookbus.parts.data.sampler import PhaseSampler
from hookbus.parts.data.transform_collate import TransformCollate
from hookbus.parts.models.patch_grid import patch_grid

if TYPE_CHECKING:
    from hookbus.parts.data.crop_collate import CropFirstCollate

    Collate = ViewCollate | TransformCollate | CropFirstCollate | BlockMaskCollate


def _loader(
    cfg: Config,
    dataset: Dataset,
    sampler: PhaseSampler,
    collate: Collate,
    batch_size: int,
    world_size: int = 1,
) -> DataLoader:
    """A DataLoader with the config's worker settings (:func:`num_workers` of
    ``world_size`` processes).

    Workers, when there are any, are persistent (started once, not at every epoch; the
    collate's epoch reaches them through shared memory) and each prepares
    ``data.prefetch_factor`` batches ahead; without workers, batches are made on one
    torch thread (:class:`SSLDataLoader`). Host memory is pinned as :func:`pin_memory`
    says.
    """
    workers = num_workers(cfg, world_size)
    return SSLDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=collate,
        drop_last=sampler.drop_last,
        num_workers=workers,
        pin_memory=pin_memory(cfg),
        persistent_workers=workers > 0,
        prefetch_factor=cfg.data.prefetch_factor if workers > 0 else None,
        # Its own generator: starting an epoch leaves the global torch RNG untouched,
        # so a run resumed mid-phase keeps the same random streams.
        generator=torch.Generator(),
        worker_init_fn=ignore_ctrl_c if workers > 0 else None,
    )


def ignore_ctrl_c(worker_id: int) -> None:
    """A loader worker ignores Ctrl-C (SIGINT), which a terminal sends to the whole
    process group: the run stops after the step's checkpoint, which the workers' batches
    lead to (:mod:`hookbus.engine.process.preemption`), and shuts them down itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


PADDING_LABEL = -100
"""The label of the test items that pad a split to a multiple of the world size: negative,
so the meters and the probe leave it out, and cross-entropy's ignored label."""


class PaddedSplit(Dataset):
    """``dataset`` padded to a multiple of ``world_size`` items with copies of its first
    items labelled :data:`PADDING_LABEL` (each keeps its own index, so its views are its
    original's). Every rank then gets as many test steps, and no image counts twice."""

    def __init__(self, dataset: Dataset, world_size: int) -> None:
        self.dataset = dataset
        self.size = len(dataset)  # type: ignore[arg-type]
        self.padded = -(-self.size // world_size) * world_size

    def __len__(self) -> int:
        return self.padded

    def __getitem__(self, index: int) -> tuple:
        if index < self.size:
            return self.dataset[index]
        image, _, original = self.dataset[index - self.size]
        return image, PADDING_LABEL, original


MAX_AUTO_WORKERS = 8
"""The most worker processes ``data.num_workers: auto`` starts per process."""


def num_workers(cfg: Config, world_size: int = 1) -> int:
    """The loader workers of a process: ``data.num_workers``, where ``auto`` means none
    for ``data.pipeline: batch`` (its in-memory tensors are augmented fastest in the
    training process) and, for the pipelines of image files, the cores this process may
    use (those of the machine shared by ``world_size`` processes) but one, which is left
    to the training step, at most :data:`MAX_AUTO_WORKERS`."""
    setting = cfg.data.num_workers
    if setting != "auto":
        return setting
    if cfg.data.pipeline == "batch":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_AUTO_WORKERS, max(0, (cores or 1) // world_size - 1))


def pin_memory(cfg: Config) -> bool:
    """Whether batches go to pinned host memory: ``data.pin_memory``, where ``auto``
    means when the run trains on a CUDA device (``machine.device`` and CUDA present)."""
    setting = cfg.data.pin_memory
    if setting == "auto":
        return cfg.machine.device != "cpu" and torch.cuda.is_available()
    return setting


def build_data_loaders(
    cfg: Config,
    *,
    rank: int = 0,
    world_size: int = 1,
    datasets: tuple[Dataset, Dataset] | None = None,
) -> dict[str, DataLoader]:
    """The loaders ``"train"``, ``"test"`` and ``"memory"`` of this rank, over the data
    set ``data.name`` names, or over ``datasets`` (train, test) when given.

    * train: the train split, shuffled per epoch and sharded, ``data.batch_size``,
      ``data.drop_last`` (for the last batch and for the sharding), batches of
      ``data.num_views`` augmented views (then ``data.small_views.count`` small ones);
    * test: the test split in order, sharded without dropping, ``data.test_batch_size``,
      views plus the clean images; on several ranks the split is padded to a multiple
      of the world size by :class:`PaddedSplit`, whose padding is labelled
      :data:`PADDING_LABEL`, so that the evaluations count each test image once;
    * memory: the whole train split on every rank, in order, clean images only, for
      the kNN memory bank.

    Views come from :func:`collates`.
    """
    train_set, test_set = datasets or DATASETS.get(cfg.data.name)(cfg.data)
    # hookbus's data sets, and those it takes from Python, are map-style: they have a len.
    train_size = len(cast(Sized, train_set))
    seed = cfg.trainer.seed
    train_collate, test_collate, memory_collate = collates(cfg)
    order: dict[str, Any] = {"shuffle": True, "seed": seed, "rank": rank, "world_size": world_size}
    order["drop_last"] = cfg.data.drop_last
    # A data set with its own train order (shards: the streaming library's) gives its sampler.
    own_sampler = getattr(train_set, "train_sampler", None)
    train = _loader(
        cfg,
        train_set,
        PhaseSampler(train_size, **order)
        if own_sampler is None
        else own_sampler(
            **order,
            batch_size=cfg.data.batch_size,
            canonical_nodes=cfg.data.shards.canonical_nodes,
        ),
        train_collate,
        cfg.data.batch_size,
        world_size,
    )
    if world_size > 1:
        test_set = PaddedSplit(test_set, world_size)
    test = _loader(
        cfg,
        test_set,
        PhaseSampler(
            len(cast(Sized, test_set)), shuffle=False, seed=seed, rank=rank, world_size=world_size
        ),
        test_collate,
        cfg.data.test_batch_size,
        world_size,
    )
    memory = _loader(
        cfg,
        train_set,
        PhaseSampler(train_size, shuffle=False, seed=seed),
        memory_collate,
        cfg.data.test_batch_size,
        world_size,
    )
    return {"train": train, "test": test, "memory": memory}


def collates(cfg: Config) -> tuple[Collate, Collate, Collate]:
    """The train (views), test (views and clean images) and memory (clean images)
    collate functions of ``data.pipeline``.

    ``batch``: :class:`ViewCollate` with :class:`BatchAugment` (``data.augment``) on
    in-memory image tensors; small views use ``data.small_views.crop_area``.
    ``torchvision``: :class:`TransformCollate` with the ``transforms.v2`` pipelines of
    ``data.torchvision``; clean images are resized and center-cropped.
    ``crop_first``: :class:`CropFirstCollate` with the same distributions, its color
    augmentations in the loader unless ``data.augment_device`` moves them to the
    training device. Large view ``k`` takes ``data.torchvision.per_view[k]``'s
    probabilities where given, small views the shared ones. For ``loss.name: ijepa`` the
    train and test collates add the multi-block masks
    (:class:`~hookbus.parts.data.ijepa_masks.BlockMaskCollate`).
    """
    made = _view_collates(cfg)
    if cfg.loss.name != "ijepa":
        return made
    # I-JEPA's masks, made beside the views of the train and test batches.
    grid, settings = patch_grid(cfg), block_settings(cfg)
    check_drawable(grid, settings)
    train, test, memory = made
    seed = cfg.trainer.seed
    return (
        BlockMaskCollate(train, grid, settings, seed),
        BlockMaskCollate(test, grid, settings, seed),
        memory,
    )


def adaptation_sizes(cfg: Config) -> tuple[int, int] | None:
    """The sides ``(global, small)`` of the views in DINOv3's adaptation phase
    (``loss.dinov3.adaptation_image_size``, ``adaptation_small_size``; a side not given
    stays as it was); None when the run has no adaptation phase."""
    dinov3 = getattr(cfg.loss, "dinov3", None)
    if cfg.loss.name != "dinov3" or dinov3 is None or dinov3.adaptation_epoch is None:
        return None
    data = cfg.data
    return (
        dinov3.adaptation_image_size or data.image_size,
        dinov3.adaptation_small_size or data.small_views.size,
    )


def _view_collates(cfg: Config) -> tuple[Collate, Collate, Collate]:
    # The train collate function cuts the adaptation phase's sizes when told to
    # (set_adapted, by the adaptation_phase hook); the test views keep the first sizes.
    data, seed = cfg.data, cfg.trainer.seed
    small = data.small_views
    adapted = adaptation_sizes(cfg)
    if data.pipeline == "batch":
        batch_augment = BatchAugment(data.augment)
        small_augment = BatchAugment(data.augment.model_copy(update={"crop_area": small.crop_area}))
        views: dict[str, Any] = {
            "small_augment": small_augment,
            "num_small_views": small.count,
            "small_size": small.size,
        }
        return (
            ViewCollate(batch_augment, data.num_views, seed, **views, adapted_sizes=adapted),
            ViewCollate(batch_augment, data.num_views, seed, with_image=True, **views),
            ViewCollate(None, data.num_views, seed, with_views=False, with_image=True),
        )
    # Imported here, not at the top: both pipelines of image files load torchvision
    # (its decoder and transforms, about a second), which a run on tensors never needs.
    from hookbus.parts.data.crop_collate import CropFirstCollate, ViewSpec
    from hookbus.parts.data.transforms import clean_transform, view_transform

    augment = data.torchvision
    specs = [
        ViewSpec(data.image_size, augment.crop_scale, augment.for_view(number))
        for number in range(data.num_views)
    ]
    specs += [ViewSpec(small.size, small.crop_area, augment)] * small.count
    later = None
    if adapted is not None:
        later = [
            spec._replace(size=adapted[0] if number < data.num_views else adapted[1])
            for number, spec in enumerate(specs)
        ]
    if data.pipeline == "crop_first":
        in_loader = data.augment_device == "cpu"
        skip = data.name == "image_folder" and data.folder.skip_unreadable
        options: dict[str, Any] = {"finish_views": in_loader, "skip_unreadable": skip}
        return (
            CropFirstCollate(specs, None, augment, seed, **options, adapted_views=later),
            CropFirstCollate(specs, data.image_size, augment, seed, **options),
            CropFirstCollate([], data.image_size, augment, seed, skip_unreadable=skip),
        )
    view_transforms = [view_transform(spec.augment, spec.size, spec.crop_scale) for spec in specs]
    later_transforms = None
    if later is not None:
        later_transforms = [
            view_transform(spec.augment, spec.size, spec.crop_scale) for spec in later
        ]
    clean = clean_transform(augment, data.image_size)
    return (
        TransformCollate(view_transforms, None, seed, adapted_transforms=later_transforms),
        TransformCollate(view_transforms, clean, seed),
        TransformCollate([], clean, seed),
    )


def set_loader_epoch(loader: DataLoader, epoch: int) -> None:
    """Pass ``epoch`` to the loader's sampler and collate function where they take it."""
    for part in (loader.sampler, loader.collate_fn):
        set_epoch = getattr(part, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)

"""The labelled images ``hookbus eval`` encodes: the run's own train and test splits, the
digits, or a labelled folder (``train/`` and ``test/``, one folder per class in each),
as the run's clean evaluation view."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor
from torch.utils.data import Dataset

from hookbus.config import Config
from hookbus.embed_source import IMAGE_PIPELINES
from hookbus.engine.errors import ConfigError, DataError
from hookbus.parts.data.build import collates, num_workers
from hookbus.parts.data.datasets import DATASETS

DIGITS = "digits"
"""The name that stands for the scikit-learn digits (a folder of that name wins)."""

SPLITS = ("train", "test")
"""The sub-folders of a labelled folder."""


@dataclass(frozen=True)
class LabelledData:
    """The train and test splits of an evaluation, their clean-image collate function and
    what they are.

    Items of ``train`` and ``test`` are ``(image or path, label, index)``; ``collate``
    batches them as ``{"image": [B, C, S, S], "label": [B], "index": [B]}``, the
    evaluation view of the run (its normalisation and size). ``fingerprint`` changes
    when the images do (the files' paths, sizes and modification times, or the config
    of data made in memory); ``shown`` maps a batch's images back to RGB in [0, 1] for
    pictures; ``workers`` is the run's loader workers (``data.num_workers``: ``auto``
    means none for data made in memory, the cores but one for image files).
    """

    train: Dataset
    test: Dataset
    collate: Callable[[Sequence[Any]], dict]
    classes: list[str]
    description: str
    fingerprint: str
    shown: Callable[[Tensor], Tensor]
    workers: int


def labelled_data(cfg: Config, data: str | Path | None) -> LabelledData:
    """The splits of ``data`` for the encoder of a run whose config is ``cfg``.

    ``data`` None: the run's own train and test splits (``data.name``); ``"digits"``: the
    digits, for an encoder trained on them; a folder: its ``train/`` and ``test/`` class
    folders, for an encoder trained on image files (``data.pipeline`` torchvision or
    crop_first), read at the run's image size and normalisation. A missing or unlabelled
    split, or data the encoder cannot read, is a :class:`~hookbus.engine.errors.UserError`;
    so is an image that cannot be decoded, even for a run that skipped such images in
    training (``data.folder.skip_unreadable``): an evaluation's figures are of every image.
    """
    if data is not None and not (str(data) == DIGITS and not Path(data).exists()):
        cfg = _with_folder(cfg, Path(data))
        description = f"folder {data}"
    elif data is not None and cfg.data.name != DIGITS:
        raise ConfigError(
            f"the digits are for encoders trained on them; this one trained on data.name "
            f"{cfg.data.name}: give a labelled folder (train/ and test/ class folders)"
        )
    else:
        _check_own_splits(cfg)
        description = _own_description(cfg)
    if cfg.data.folder.skip_unreadable:  # an evaluation counts every image, or says which not
        folder = cfg.data.folder.model_copy(update={"skip_unreadable": False})
        cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"folder": folder})})
    train, test = DATASETS.get(cfg.data.name)(cfg.data)
    classes = _classes(train)
    return LabelledData(
        train=train,
        test=test,
        collate=collates(cfg)[2],
        classes=classes,
        description=description,
        fingerprint=_fingerprint(cfg, train, test),
        shown=_display(cfg),
        workers=num_workers(cfg),
    )


def _with_folder(cfg: Config, folder: Path) -> Config:
    """``cfg`` reading ``folder/train`` and ``folder/test`` as its image folders."""
    if not _is_folder(folder, folder):
        problem = "is not a folder" if folder.exists() else "not found"
        raise DataError(
            f"labelled folder {folder} {problem}: give a folder holding train/ and test/, "
            f"one folder per class in each, or {DIGITS}"
        )
    missing = [name for name in SPLITS if not _is_folder(folder / name, folder)]
    if missing:
        raise DataError(
            f"{folder} has no {' and no '.join(f'{name}/' for name in missing)} folder: a "
            "labelled folder holds train/ and test/, one folder per class in each"
        )
    if cfg.data.pipeline not in IMAGE_PIPELINES or cfg.model.backbone.in_channels != 3:
        raise ConfigError(
            f"this encoder was trained on {cfg.data.name} (data.pipeline {cfg.data.pipeline}, "
            f"{cfg.model.backbone.in_channels} channels), whose normalisation the config does "
            "not hold: evaluate it on its own data (no DATA argument)"
        )
    update = {
        "name": "image_folder",
        "folder": cfg.data.folder.model_copy(
            update={
                "train_dir": folder / "train",
                "test_dir": folder / "test",
                "labels": "class_folders",
            }
        ),
    }
    return cfg.model_copy(update={"data": cfg.data.model_copy(update=update)})


def _is_folder(path: Path, labelled: Path) -> bool:
    """Whether ``path`` is a folder (links followed); one that cannot be looked at (no
    permission to enter the labelled folder, a link loop) is a :class:`DataError` naming
    it, not the ``OSError`` of :meth:`pathlib.Path.is_dir`."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DataError(
                f"labelled folder {labelled}: {path} is a symbolic link loop: it leads nowhere"
            ) from None
        raise DataError(
            f"cannot read labelled folder {labelled}: {path}: {exc.strerror or exc}"
        ) from None


def _check_own_splits(cfg: Config) -> None:
    """Refuse a run whose data has no test split of its own."""
    data = cfg.data
    if data.name == "image_folder" and data.folder.test_dir is None:
        raise ConfigError(
            "the run's data has no test folder (data.folder.test_dir): give a labelled "
            "folder (train/ and test/ class folders) to evaluate on"
        )
    if data.name == "shards" and data.shards.test_path is None:
        raise ConfigError(
            "the run's shards have no test split (data.shards.test_path): give a labelled "
            "folder (train/ and test/ class folders) to evaluate on"
        )


def _own_description(cfg: Config) -> str:
    """How the run's own data is named in the results."""
    data = cfg.data
    if data.name == "image_folder":
        return f"folder {data.folder.train_dir} and {data.folder.test_dir}"
    if data.name == "shards":
        return f"shards {data.shards.path} and {data.shards.test_path}"
    return data.name


def _classes(train: Dataset) -> list[str]:
    """The class names of the train split: an image folder's class folders, else the
    label numbers."""
    named = getattr(train, "classes", None)
    if named:
        return [str(name) for name in named]
    labels = getattr(train, "labels", None)
    if isinstance(labels, Tensor) and len(labels):
        return [str(label) for label in range(int(labels.max()) + 1)]
    return []


def _fingerprint(cfg: Config, train: Dataset, test: Dataset) -> str:
    """SHA-256 of what the images are: the settings that make the evaluation view, and
    each file's path, size and modification time (image folders) or the data config
    (data made in memory, shards)."""
    hasher = hashlib.sha256()
    view = cfg.data.model_dump(mode="json", include={"name", "image_size", "pipeline"})
    view["torchvision"] = cfg.data.torchvision.model_dump(mode="json", include={"mean", "std"})
    hasher.update(json.dumps(view, sort_keys=True).encode())
    for split in (train, test):
        samples = getattr(split, "samples", None)
        if samples is None:
            hasher.update(json.dumps(cfg.data.model_dump(mode="json"), sort_keys=True).encode())
            continue
        for path, label in cast(list[tuple[Path, int]], samples):
            info = os.stat(path)
            hasher.update(f"{path}\0{label}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return hasher.hexdigest()


def _display(cfg: Config) -> Callable[[Tensor], Tensor]:
    """Images of the evaluation view ``[B, C, S, S]`` back to RGB in [0, 1]: the run's
    normalisation undone (image files), or each image scaled to its own range (data made
    in memory); one channel is repeated three times."""
    if cfg.data.pipeline in IMAGE_PIPELINES:
        mean = torch.tensor(cfg.data.torchvision.mean).view(1, -1, 1, 1)
        std = torch.tensor(cfg.data.torchvision.std).view(1, -1, 1, 1)

        def undo(images: Tensor) -> Tensor:
            return (images.float().cpu() * std + mean).clamp(0, 1)

        return undo

    def scaled(images: Tensor) -> Tensor:
        images = images.float().cpu()
        low = images.amin(dim=(1, 2, 3), keepdim=True)
        high = images.amax(dim=(1, 2, 3), keepdim=True)
        shown = (images - low) / (high - low).clamp(min=1e-12)
        return shown if shown.shape[1] == 3 else shown[:, :1].expand(-1, 3, -1, -1)

    return scaled

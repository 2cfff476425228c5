"""Images from MDS shards (MosaicML ``streaming``), local or on S3-compatible storage,
each file checked before it is read (:mod:`~hookbus.parts.data.shard_index`).

``hookbus shard FOLDER OUT`` writes them (:mod:`hookbus.shard`): each sample holds an
image file's bytes, as they were, and its label; ``OUT/hookbus_shards.json`` the class
names. :class:`ShardDataset` reads them, fetching a
remote shard into ``data.shards.cache_dir`` the first time one of its samples is read
(:class:`~hookbus.parts.data.shard_cache.ShardCache`);
its train order is :class:`~hookbus.parts.data.shards_sampler.ShardSampler`'s, the
library's partition and shuffle.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import re
import socket
from functools import partial
from pathlib import Path
from typing import Any

import torch.distributed as dist
from torch import Tensor
from torch.utils.data import Dataset

from hookbus.engine.errors import ConfigError, DataError
from hookbus.engine.process import distributed
from hookbus.parts.data.image_decode import SourceImage
from hookbus.parts.data.shard_cache import INDEX_FILE, ShardCache
from hookbus.parts.data.shard_index import (
    CLASSES_FILE,
    ShardEntry,
    check_shard,
    read_classes,
    read_index,
    read_sample,
)
from hookbus.parts.data.shards_sampler import ShardSampler

S3_URL = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$")
"""An S3 URL: ``s3://BUCKET/PREFIX`` (bucket names as S3 allows them)."""

logger = logging.getLogger("hookbus")


def check_location(path: str, where: str) -> None:
    """Refuse, with a :class:`ConfigError` naming ``where``, a location that is neither
    a local folder nor an ``s3://BUCKET/PREFIX`` URL. A URL is checked, not fetched."""
    if "://" in path:
        if not S3_URL.match(path):
            raise ConfigError(
                f"{where}: {path!r} is not an s3://BUCKET/PREFIX URL (the remote shards "
                "hookbus reads; S3-compatible stores through S3_ENDPOINT_URL)"
            )
        return
    if not os.path.lexists(Path(path) / INDEX_FILE):
        raise ConfigError(
            f"{where}: {path} holds no {INDEX_FILE}: give a folder written by hookbus shard"
        )


class ShardDataset(Dataset):
    """The samples of the shards at ``location``; item ``i`` is ``(uint8 RGB image
    [3, H, W], label, i)``, as :class:`~hookbus.parts.data.image_folder.ImageFolderDataset`
    gives them. ``cache`` is the folder that holds remote shards (unused for local ones).
    With ``decode=False`` item ``i`` holds the image file's bytes instead (a
    :class:`ShardImage`, which names its shard and sample), for
    ``data.pipeline: crop_first``, which decodes each JPEG at the size its crops need.

    Made, it has checked the index, the class list and (:mod:`~hookbus.parts.data.
    shard_index`) every local shard: a shard that does not fit its index is one line
    naming it before the first step. A remote shard is checked when it is fetched, before
    it is kept in the cache folder; those the folder keeps already, when it is opened.
    """

    def __init__(self, location: str, cache: Path | None, decode: bool = True) -> None:
        self.cache: ShardCache | None = None
        if "://" in location:
            if cache is None:
                raise ConfigError(
                    "data.shards.cache_dir: shards at an s3:// URL need a local folder to keep them"
                )
            self.cache = ShardCache(location, cache)
            self.cache.open()
        self.local = str(cache) if self.cache is not None else location
        self.location = location
        self.decode = decode
        self.entries = read_index(Path(self._fetch(INDEX_FILE)))
        self.classes = read_classes(Path(self._fetch(CLASSES_FILE)))
        if self.cache is None:
            check_local_shards(self.entries, self.local, self.classes)
        else:  # a cache folder may be each machine's own: every rank checks what it holds
            for entry in self.entries:
                path = Path(entry.name(self.local))
                if os.path.lexists(path):
                    check_shard(path, entry, self.classes)
        if not any(entry.hashes for entry in self.entries):
            logger.warning(
                "the shards at %s record no hash: their sizes, samples and labels are "
                "checked, their bytes are not (hookbus shard records a SHA-256 of each)",
                location,
            )
        self.shard_sizes = [entry.samples for entry in self.entries]
        self.starts = [0, *itertools.accumulate(self.shard_sizes)][:-1]
        self.size = sum(self.shard_sizes)

    def _fetch(self, name: str, entry: ShardEntry | None = None) -> str:
        """The local path of the shard folder's file ``name``, fetched first if remote
        (a shard checked against ``entry`` before it is kept); its readers say when it
        is missing."""
        if self.cache is not None:
            check = (
                None if entry is None else partial(check_shard, entry=entry, classes=self.classes)
            )
            return self.cache.fetch(name, check)
        return os.path.join(self.local, name)

    def __len__(self) -> int:
        return self.size

    def train_sampler(self, **options: Any) -> ShardSampler:
        """The train phases' sampler: :class:`ShardSampler` over these shards."""
        return ShardSampler(self.shard_sizes, **options)

    def __getitem__(self, index: int) -> tuple[Tensor | ShardImage, int, int]:
        shard = bisect.bisect_right(self.starts, index) - 1
        entry = self.entries[shard]
        path = Path(self._fetch(entry.basename, entry))
        sample = index - self.starts[shard]
        data, label = read_sample(path, entry, sample, self.classes)
        where = f"{path} sample {sample}"
        image = decode_image(data, where) if self.decode else ShardImage(data, where)
        return image, label, index


def check_local_shards(entries: list[ShardEntry], folder: str, classes: list[str]) -> None:
    """Check every shard of ``entries`` in ``folder`` (:func:`check_shard`), each read once
    per machine: in one process, all of them, in order; with a process group, the shards
    are shared out among the ranks on each machine (a machine may hold its own copy of the
    set), each rank checks its share, and the first problem in the index's order, whichever
    rank found it, is raised on every rank as the same :class:`DataError`. A collective:
    every rank of the group calls it, for the same set, before the first step."""
    if not distributed.is_distributed():
        for entry in entries:
            check_shard(Path(entry.name(folder)), entry, classes)
        return
    group = distributed.control_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    hosts: list[Any] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname(), group=group)
    peers = [other for other, host in enumerate(hosts) if host == hosts[rank]]
    found: tuple[int, str] | None = None
    for position in range(peers.index(rank), len(entries), len(peers)):
        entry = entries[position]
        try:
            check_shard(Path(entry.name(folder)), entry, classes)
        except DataError as exc:
            found = (position, str(exc))
            break
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, found, group=group)
    problems = sorted(problem for problem in gathered if problem is not None)
    if problems:
        raise DataError(problems[0][1])


class ShardImage(bytes):
    """A shard sample's image file bytes, with ``where`` (the shard and the sample) for
    the one line naming it when it cannot be decoded."""

    where: str

    def __new__(cls, data: bytes, where: str) -> ShardImage:
        image = super().__new__(cls, data)
        image.where = where
        return image

    def __reduce__(self) -> tuple:
        return (ShardImage, (bytes(self), self.where))


def decode_image(data: bytes, where: str) -> Tensor:
    """The image file ``data`` as an upright uint8 RGB tensor ``[3, H, W]``, decoded as
    an image folder's file is (:class:`~hookbus.parts.data.image_decode.SourceImage`: EXIF
    orientation, 16-bit and transparency); DataError naming ``where`` if it cannot be read."""
    return SourceImage(data, where).pixels()[0].contiguous()


def build_shards(
    location: str, test_location: str | None, cache: Path | None, decode: bool = True
) -> tuple:
    """The train and test :class:`ShardDataset` (the train one twice when
    ``test_location`` is None), decoding their images as ``decode`` says."""
    check_location(location, "data.shards.path")
    if test_location is not None:
        check_location(test_location, "data.shards.test_path")
    train = ShardDataset(location, cache, decode)
    if test_location is None:
        return train, train
    return train, ShardDataset(test_location, None if cache is None else cache / "test", decode)

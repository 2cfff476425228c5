"""Images from MDS shards (MosaicML ``streaming``), local or on S3-compatible storage.

``hookbus shard FOLDER OUT`` writes them (:mod:`hookbus.shard`): each sample holds an
image file's bytes, as they were, and its label; ``OUT/hookbus_shards.json`` the class
names. :class:`ShardDataset` reads them with the library's shard readers, fetching a
remote shard into ``data.shards.cache_dir`` the first time one of its samples is read
(:class:`~hookbus.parts.data.shard_cache.ShardCache`);
its train order is :class:`~hookbus.parts.data.shards_sampler.ShardSampler`'s, the
library's partition and shuffle.
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError
from streaming.base.format import reader_from_json
from torch import Tensor
from torch.utils.data import Dataset

from hookbus.engine.errors import ConfigError, DataError
from hookbus.parts.data.image_folder import NOT_AN_IMAGE
from hookbus.parts.data.pil_image import pil_to_tensor
from hookbus.parts.data.shard_cache import INDEX_FILE, ShardCache
from hookbus.parts.data.shards_sampler import ShardSampler

CLASSES_FILE = "hookbus_shards.json"
"""The file beside the shards' ``index.json`` that names the classes."""

S3_URL = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$")
"""An S3 URL: ``s3://BUCKET/PREFIX`` (bucket names as S3 allows them)."""


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
    if not (Path(path) / INDEX_FILE).is_file():
        raise ConfigError(
            f"{where}: {path} holds no {INDEX_FILE}: give a folder written by hookbus shard"
        )


class ShardDataset(Dataset):
    """The samples of the shards at ``location``; item ``i`` is ``(uint8 RGB image
    [3, H, W], label, i)``, as :class:`~hookbus.parts.data.image_folder.ImageFolderDataset`
    gives them. ``cache`` is the folder that holds remote shards (unused for local ones).
    With ``decode=False`` item ``i`` holds the image file's bytes instead, for
    ``data.pipeline: crop_first``, which decodes each JPEG at the size its crops need.
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
        try:
            index = json.loads(Path(self._fetch(INDEX_FILE)).read_text())
            self.classes: list[str] = json.loads(Path(self._fetch(CLASSES_FILE)).read_text())[
                "classes"
            ]
            self.readers = [reader_from_json(self.local, None, shard) for shard in index["shards"]]
            for reader in self.readers:
                reader.validate(allow_unsafe_types=False)  # refuses pickled columns: code
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            raise DataError(
                f"{location}: not shards written by hookbus shard ({type(exc).__name__}: {exc})"
            ) from None
        for reader in self.readers:
            for raw, _ in reader.file_pairs:
                if raw.basename != os.path.basename(raw.basename) or raw.basename in ("", ".."):
                    raise DataError(f"{location}: shard file name {raw.basename!r} is not a name")
        self.shard_sizes = [reader.samples for reader in self.readers]
        self.starts = [0, *itertools.accumulate(self.shard_sizes)][:-1]
        self.size = sum(self.shard_sizes)

    def _fetch(self, name: str) -> str:
        """The local path of the shard folder's file ``name``, fetched first if remote."""
        if self.cache is not None:
            return self.cache.fetch(name)
        local = os.path.join(self.local, name)
        if not os.path.exists(local):
            raise DataError(f"shard file {local} is missing")
        return local

    def __len__(self) -> int:
        return self.size

    def train_sampler(self, **options: Any) -> ShardSampler:
        """The train phases' sampler: :class:`ShardSampler` over these shards."""
        return ShardSampler(self.shard_sizes, **options)

    def __getitem__(self, index: int) -> tuple[Tensor | bytes, int, int]:
        shard = bisect.bisect_right(self.starts, index) - 1
        reader = self.readers[shard]
        for raw, _ in reader.file_pairs:
            self._fetch(raw.basename)
        sample = reader.get_item(index - self.starts[shard])
        data = sample["image"]
        image = decode_image(data, f"{self.location} sample {index}") if self.decode else data
        return image, int(sample["label"]), index


def decode_image(data: bytes, where: str) -> Tensor:
    """The image file ``data`` as a uint8 RGB tensor ``[3, H, W]``; DataError naming
    ``where`` if Pillow cannot read it."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return pil_to_tensor(image.convert("RGB"))
    except UnidentifiedImageError:
        raise DataError(f"cannot read image {where}: {NOT_AN_IMAGE}") from None
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as exc:
        raise DataError(f"cannot read image {where}: {exc}") from None


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

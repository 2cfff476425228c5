"""Fixtures the shard tests share (test_shards.py, test_shards_s3.py): a small labelled
folder of real photographs and its train split written as several shards.

A test file that needs another folder (more photos a class, larger ones) defines its own
``photos``, which pytest takes over this one for that file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.shard import write_shards
from tests.photos import make_photo_folder


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A train and a test folder of 20 px photos, 6 a class (tests/photos.py)."""
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=6, size=20)


@pytest.fixture(scope="module")
def shards(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 12 train photos written as shards of at most 4 KiB (several shards)."""
    out = tmp_path_factory.mktemp("shards") / "train"
    write_shards(photos / "train", out, shard_bytes=4096)
    return out

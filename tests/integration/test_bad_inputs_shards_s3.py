"""The bad-input table of remote shards' cache folder (``data.shards.cache_dir``) and of
shards fetched from a store, against the real S3 server of test_shards_s3.py (moto's,
on a loopback port): every row is one line naming the folder or the shard, exit status
2 (1 for a full disk), and nothing bad is kept in the cache."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

from hookbus.cli import main
from hookbus.engine.errors import DataError
from hookbus.parts.data.shard_cache import INDEX_FILE, SOURCE_FILE
from hookbus.parts.data.shards import ShardDataset
from tests.disk_mounts import fill, small_tmpfs
from tests.integration.s3_store import BUCKET, upload
from tests.integration.test_shards import RECIPE, SMALL


def _train(location: str, cache: Path, run: Path) -> list[str]:
    return [
        "train",
        str(RECIPE),
        *SMALL,
        f"data.shards.path={location}",
        f"data.shards.cache_dir={cache}",
        f"checkpoint.dir={run}",
        "-q",
    ]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err


def _filled(url: str, shards: Path, cache: Path) -> Path:
    """``cache`` holding every file of ``url``'s shards, as a run that read them all
    leaves it (the store's files are the local shards')."""
    shutil.copytree(shards, cache)
    (cache / SOURCE_FILE).write_text(json.dumps({"url": url}) + "\n")
    return cache


def _first_kept(cache: Path) -> Path:
    return sorted(cache.glob("*.mds"))[0]


def _replace(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def plant(cache: Path) -> None:
        shard = _first_kept(cache)
        shard.unlink()
        make(shard)

    return plant


def _sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(8 << 30)


def _garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


KEPT_ROWS: dict[str, tuple[Callable[[Path], None], str]] = {
    "a kept shard garbled": (
        lambda c: _garble(_first_kept(c)),
        "shard .*shard.00000.mds does not match its sha256 in index.json",
    ),
    "a kept shard truncated": (
        lambda c: _first_kept(c).write_bytes(b"\0" * 10),
        "shard .*shard.00000.mds is 10 bytes, its index says \\d+",
    ),
    "a kept shard a FIFO": (_replace(os.mkfifo), "shard.00000.mds is a FIFO"),
    "a kept shard a link to /dev/zero": (
        _replace(lambda p: p.symlink_to("/dev/zero")),
        "shard.00000.mds is a character device",
    ),
    "a kept shard sparse 8 GiB": (_replace(_sparse), "shard.00000.mds is 8.0 GiB, over"),
    "a kept shard a symbolic link loop": (
        _replace(lambda p: p.symlink_to(p)),
        "shard.00000.mds: Too many levels of symbolic links",
    ),
    "the kept index a FIFO": (
        lambda c: ((c / INDEX_FILE).unlink(), os.mkfifo(c / INDEX_FILE)),
        "index.json is a FIFO",
    ),
    "the kept note a FIFO": (
        lambda c: ((c / SOURCE_FILE).unlink(), os.mkfifo(c / SOURCE_FILE)),
        "keeps an index.json of unknown origin",
    ),
}
"""Each class of bad input that applies to a filled cache folder's files."""


@pytest.mark.parametrize("name", sorted(KEPT_ROWS))
def test_a_bad_file_in_the_cache_folder_is_one_line_naming_it(
    name: str, bucket: str, shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = _filled(bucket, shards, tmp_path / "cache")
    KEPT_ROWS[name][0](cache)
    assert main(_train(bucket, cache, tmp_path / "run")) == 2
    assert re.search(KEPT_ROWS[name][1], _one_line(capsys))


FOLDER_ROWS: dict[str, tuple[Callable[[Path], None], str]] = {
    "the cache folder a file": (lambda c: c.write_text("x"), "is a file, not a folder"),
    "the cache folder a symbolic link loop": (
        lambda c: c.symlink_to(c),
        "is a symbolic link loop: give a folder",
    ),
}


@pytest.mark.parametrize("name", sorted(FOLDER_ROWS))
def test_a_cache_folder_that_is_no_folder_is_one_line_naming_the_key(
    name: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    FOLDER_ROWS[name][0](cache)
    assert main(_train(bucket, cache, tmp_path / "run")) == 2
    err = _one_line(capsys)
    assert f"data.shards.cache_dir {cache} {FOLDER_ROWS[name][1]}" in err, err


@pytest.mark.parametrize("place", ["read-only", "full"])
def test_a_read_only_or_full_cache_folder_is_one_line(
    place: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a real 64 KiB tmpfs: read-only is the user's to fix (exit 2), full the
    machine's (exit 1). Nothing half-downloaded is kept."""
    disk = tmp_path / "disk"
    with small_tmpfs(disk, read_only=place == "read-only"):
        if place == "full":
            fill(disk)
        status = main(_train(bucket, disk, tmp_path / "run"))
        err = _one_line(capsys)
        if place == "read-only":
            assert status == 2
            assert f"cannot write in data.shards.cache_dir {disk}: Read-only file system" in err
        else:
            assert status == 1
            assert f"cannot write {disk}: No space left on device" in err, err
        assert sorted(p.name for p in disk.iterdir()) == (["filler"] if place == "full" else [])


def test_a_shard_the_store_holds_garbled_is_refused_and_never_kept(
    bucket: str, shards: Path, endpoint: str, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(shards, tmp_path / "garbled"))
    _garble(copy / "shard.00001.mds")
    upload(endpoint, copy, "garbled")
    url, cache = f"s3://{BUCKET}/garbled", tmp_path / "cache"
    data = ShardDataset(url, cache)
    data[0]  # the first shard is sound
    with pytest.raises(
        DataError, match=rf"^shard {url}/shard\.00001\.mds does not match its sha256"
    ):
        data[data.starts[1]]
    assert not (cache / "shard.00001.mds").exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def test_a_store_index_from_another_writer_is_refused_naming_it(
    bucket: str, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = boto3.client("s3", endpoint_url=endpoint)
    client.put_object(Bucket=BUCKET, Key="nested/index.json", Body=b"[" * 5000 + b"]" * 5000)
    client.put_object(Bucket=BUCKET, Key="nested/hookbus_shards.json", Body=b'{"classes": []}')
    assert main(_train(f"s3://{BUCKET}/nested", tmp_path / "cache", tmp_path / "run")) == 2
    assert "is nested deeper than 6 levels" in _one_line(capsys)

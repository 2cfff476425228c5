"""Fixtures the shard tests share (test_shards.py, test_shards_s3.py and the bad-input
tables of shards): a small labelled folder of real photographs, its train split written
as several shards, and a real S3 server (moto's) holding them.

A test file that needs another folder (more photos a class, larger ones) defines its own
``photos``, which pytest takes over this one for that file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus.shard import write_shards
from tests.integration.s3_store import BUCKET, CREDENTIALS, URL, upload
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


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on a free loopback port, its URL in ``S3_ENDPOINT_URL`` and
    credentials in the environment (no AWS config file or profile of the machine's)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    nowhere = tmp_path_factory.mktemp("aws") / "none"
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            env.delenv(name, raising=False)
        env.setenv("AWS_CONFIG_FILE", str(nowhere))
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
        for name, value in CREDENTIALS.items():
            env.setenv(name, value)
        env.setenv("S3_ENDPOINT_URL", url)
        yield url
    server.stop()


@pytest.fixture(scope="module")
def bucket(endpoint: str, shards: Path) -> str:
    """The shards' files uploaded under ``s3://photos/train/``; the URL."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=BUCKET)
    upload(endpoint, shards, "train")
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="train/")["Contents"]
    assert sorted(item["Key"] for item in listed) == [
        f"train/{p.name}" for p in sorted(shards.iterdir())
    ]
    return URL

"""Remote shards against a real S3-protocol server: moto's (``moto[server]``), on a
loopback port, spoken to over HTTP by the same botocore client streaming downloads
with, pointed at it the documented way (``S3_ENDPOINT_URL`` and the AWS credential
variables). The shards are written by ``hookbus shard`` from real photographs and
uploaded with boto3, as a user uploads them (the server and bucket: conftest.py's
``endpoint`` and ``bucket``)."""

from __future__ import annotations

import shlex
import socket
import time
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer, load_config
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import DataError, PreemptedError
from hookbus.parts.data import shard_cache
from hookbus.parts.data.shard_cache import INDEX_FILE, SOURCE_FILE
from hookbus.parts.data.shards import CLASSES_FILE, ShardDataset
from hookbus.shard import write_shards
from tests.doc_blocks import ROOT, commands, extract
from tests.integration.s3_store import BUCKET, CREDENTIALS, URL, upload
from tests.integration.test_shards import RECIPE, SMALL

GUIDE = ROOT / "docs" / "guides" / "distributed.md"


def _cached(cache: Path) -> list[str]:
    return sorted(path.name for path in cache.iterdir())


def test_shards_from_the_server_equal_the_local_ones_and_are_fetched_when_first_read(
    bucket: str, shards: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    remote = ShardDataset(bucket, cache)
    assert _cached(cache) == sorted([CLASSES_FILE, INDEX_FILE, SOURCE_FILE])  # the index
    local = ShardDataset(str(shards), None)
    assert len(remote.shard_sizes) == len(local.shard_sizes) > 1
    assert (remote.shard_sizes, remote.classes) == (local.shard_sizes, local.classes)
    names = [entry.basename for entry in local.entries]
    for index in range(len(local)):
        image, label, position = remote[index]
        expected, expected_label, _ = local[index]
        assert (label, position) == (expected_label, index)
        assert torch.equal(image, expected), index
        shard = max(s for s, start in enumerate(local.starts) if start <= index)
        assert _cached(cache) == sorted(
            [CLASSES_FILE, INDEX_FILE, SOURCE_FILE, *names[: shard + 1]]
        )
    for name in names:  # the bytes the server holds, unchanged
        assert (cache / name).read_bytes() == (shards / name).read_bytes()


def test_a_filled_cache_is_read_without_fetching_the_shards_again(
    bucket: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = ShardDataset(bucket, cache)
    expected = [first[index] for index in range(len(first))]
    written = {name: (cache / name).stat().st_mtime_ns for name in _cached(cache)}
    again = ShardDataset(bucket, cache)
    for index, (image, label, _) in enumerate(expected):
        assert torch.equal(again[index][0], image) and again[index][1] == label
    assert {name: (cache / name).stat().st_mtime_ns for name in _cached(cache)} == written


def test_a_url_ending_in_a_slash_names_the_same_shards(bucket: str, tmp_path: Path) -> None:
    remote = ShardDataset(f"{bucket}/", tmp_path / "cache")
    assert torch.equal(remote[0][0], ShardDataset(bucket, tmp_path / "other")[0][0])


def _train(run: Path, location: str, *overrides: str) -> None:
    cfg = load_config(
        RECIPE, [*SMALL, f"data.shards.path={location}", f"checkpoint.dir={run}", *overrides]
    )
    SSLTrainer(cfg).train()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_a_run_from_the_server_stopped_mid_phase_ends_as_the_run_from_local_shards(
    workers: int, bucket: str, shards: Path, tmp_path: Path
) -> None:
    """The remote run's shards fetched in this process, or in 2 loader workers at once."""
    reference, run, cache = tmp_path / "local", tmp_path / "remote", tmp_path / "cache"
    _train(reference, str(shards))
    remote = (f"data.shards.cache_dir={cache}", f"data.num_workers={workers}")
    stop = "hooks.extra=[{name: request_stop, params: {rank: 0, at_iteration: 5}}]"
    with pytest.raises(PreemptedError):
        _train(run, bucket, *remote, "trainer.imports=[tests.failure_hooks]", stop)
    stopped = newest_valid_checkpoint(run)[1]
    assert (stopped["iteration"], stopped["phase_done"]) == (5, False)  # step 2 of 3
    _train(run, bucket, *remote)
    expected, resumed = (newest_valid_checkpoint(path)[1] for path in (reference, run))
    assert resumed["iteration"] == expected["iteration"] == 6
    for name, value in expected["model"].items():
        assert torch.equal(resumed["model"][name], value), name
    assert _cached(cache) == sorted([SOURCE_FILE, *(path.name for path in shards.iterdir())])


@pytest.mark.slow
def test_the_guides_command_trains_from_the_server(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``hookbus train`` of docs/guides/distributed.md's S3 block, as written, with
    the variables it exports set to the test server's."""
    [block] = [b for b in extract(GUIDE) if b.language == "bash" and bucket in b.text]
    lines = commands(block)
    exported = {
        word.split("=")[0]
        for line in lines
        if line.startswith("export ")
        for word in shlex.split(line)[1:]
    }
    assert exported == {"S3_ENDPOINT_URL", *CREDENTIALS} - {"AWS_DEFAULT_REGION"}
    [train] = [shlex.split(line) for line in lines if line.startswith("hookbus train ")]
    assert f"data.shards.path={bucket}" in train
    monkeypatch.chdir(tmp_path)
    train[2] = str(ROOT / train[2])
    assert main([*train[1:], "-q"]) == 0
    cache = tmp_path / "runs" / "shards-cache"
    assert (cache / "shard.00000.mds").is_file() and newest_valid_checkpoint(
        tmp_path / "runs" / "shards-s3"
    )[1]["phase_done"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


DEAD = "http://127.0.0.1:{port}"
"""An endpoint on a free port: nothing listens there."""

NO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}


@pytest.mark.parametrize(
    ("location", "env", "reason"),
    [
        (f"s3://{BUCKET}/nothere", {}, "not found"),
        ("s3://no-such-bucket/train", {}, "not found"),
        (URL, {"S3_ENDPOINT_URL": DEAD}, "Could not connect to the endpoint URL"),
        (URL, NO_CREDENTIALS, "Unable to locate credentials"),
    ],
    ids=["missing key", "wrong bucket", "server down", "no credentials"],
)
def test_shards_the_server_cannot_give_are_one_line_naming_the_url(
    location: str,
    env: dict[str, str | None],
    reason: str,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credentials: no other source
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value.format(port=_free_port()))
    command = ["train", str(RECIPE), *SMALL, f"data.shards.path={location}"]
    command += [f"data.shards.cache_dir={tmp_path / 'cache'}", f"checkpoint.dir={tmp_path / 'run'}"]
    started = time.monotonic()
    assert main([*command, "-q"]) == 2
    assert time.monotonic() - started < 60
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookbus train: error: cannot fetch {location}/{INDEX_FILE}: "), err
    assert reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "cache" / INDEX_FILE).exists()
    monkeypatch.undo()
    assert len(ShardDataset(bucket, tmp_path / "cache")) == 12  # the same folder, the right URL


def test_a_server_that_goes_away_after_opening_is_one_line_naming_the_shard(
    bucket: str, shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = ShardDataset(bucket, tmp_path / "cache")
    monkeypatch.setenv("S3_ENDPOINT_URL", DEAD.format(port=_free_port()))
    first = remote.entries[0].basename
    with pytest.raises(DataError, match=rf"^cannot fetch {bucket}/{first}: Could not connect"):
        remote[0]
    assert not (tmp_path / "cache" / first).exists()


def test_a_server_that_never_answers_fails_within_the_download_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    """A port that accepts connections and never answers: each of botocore's tries
    waits ``DOWNLOAD_TIMEOUT_S`` for a byte, then the fetch is one line naming the URL."""
    monkeypatch.setattr(shard_cache, "DOWNLOAD_TIMEOUT_S", 1.0)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("S3_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        with pytest.raises(DataError, match=rf"^cannot fetch {URL}/index.json: Read timeout"):
            ShardDataset(URL, tmp_path / "cache")
        assert time.monotonic() - started < 20


def test_a_cache_folder_keeps_one_urls_shards(
    bucket: str, shards: Path, tmp_path: Path, endpoint: str
) -> None:
    upload(endpoint, shards, "copy")
    cache = tmp_path / "cache"
    ShardDataset(bucket, cache)[0]
    with pytest.raises(
        DataError,
        match=rf"^data.shards.cache_dir {cache} keeps the shards of {bucket}, not "
        rf"s3://{BUCKET}/copy's: give each URL its own folder$",
    ):
        ShardDataset(f"s3://{BUCKET}/copy", cache)
    unknown = rf"^data.shards.cache_dir {shards} keeps an index.json of unknown origin, not"
    with pytest.raises(DataError, match=unknown):
        ShardDataset(bucket, shards)  # the local shards' folder named as the cache


def test_shards_rewritten_in_the_store_are_refused_not_read_stale(
    photos: Path, tmp_path: Path, endpoint: str
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_shards(photos / "train", first, shard_bytes=4096)
    write_shards(photos / "test", second, shard_bytes=8192)
    upload(endpoint, first, "rewritten")
    url, cache = f"s3://{BUCKET}/rewritten", tmp_path / "cache"
    ShardDataset(url, cache)[0]
    ShardDataset(url, cache)  # the same index: the kept shards are the store's
    upload(endpoint, second, "rewritten")
    with pytest.raises(
        DataError,
        match=rf"^{url}: the shards changed since data.shards.cache_dir {cache} kept them "
        r"\(another index.json\): empty the folder$",
    ):
        ShardDataset(url, cache)
    assert _cached(cache) == sorted([CLASSES_FILE, INDEX_FILE, SOURCE_FILE, "shard.00000.mds"])

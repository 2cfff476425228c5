"""Streamed data shards: ``hookbus shard`` writes them, ``data.name: shards`` trains
from them, the streaming library's order is deterministic, and resume is exact."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer, load_config
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.config.config_changes import check_world_size
from hookbus.engine.errors import (
    PREEMPTED_EXIT_STATUS,
    ConfigError,
    DataError,
    PreemptedError,
    UserError,
)
from hookbus.parts.data import datasets
from hookbus.parts.data.image_folder import ImageFolderDataset
from hookbus.parts.data.shards import CLASSES_FILE, ShardDataset, build_shards
from hookbus.parts.data.shards_sampler import ShardSampler
from hookbus.shard import write_shards
from tests.photos import CLASSES
from tests.sample_log import global_batches

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml"
SMALL = (
    "data.name=shards",
    "data.image_size=16",
    "data.batch_size=4",
    "data.test_batch_size=32",
    "data.num_workers=0",
    "model.backbone.name=small_cnn",
    "model.backbone.width=4",
    "model.head.dims=[16,16,8]",
    "meters.knn.enabled=false",
    "optimizer.num_epochs=2",
    "optimizer.warmup_epochs=0",
    "trainer.test_every_num_epochs=2",
    "checkpoint.iter_frequency=1",
    "machine.num_threads=1",
    "hooks.progress_bar.enabled=false",
    "hooks.summary_plot.enabled=false",
    "hooks.tensorboard.enabled=false",
    "hooks.evaluation_report.enabled=false",
)
"""SimCLR on 16 px views of 12 photos: 3 steps of 4 a train phase, 2 phases."""


def test_shards_hold_the_folders_images_labels_and_class_names(photos: Path, shards: Path) -> None:
    folder = ImageFolderDataset(photos / "train")
    streamed = ShardDataset(str(shards), None)
    assert len(streamed) == len(folder) == 12
    assert len(streamed.shard_sizes) > 1
    assert streamed.classes == folder.classes == sorted(CLASSES)
    assert json.loads((shards / CLASSES_FILE).read_text()) == {"classes": sorted(CLASSES)}
    for index in range(len(folder)):
        image, label, position = streamed[index]
        expected, expected_label, _ = folder[index]
        assert (label, position) == (expected_label, index)
        assert torch.equal(image, expected)


def test_shard_refuses_an_existing_output_and_a_file_that_is_no_image(
    photos: Path, shards: Path, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match="already exists and is not an empty folder"):
        write_shards(photos / "train", shards)
    broken = tmp_path / "broken" / "cat"
    broken.mkdir(parents=True)
    (broken / "a.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(UserError, match=r"a\.jpg: not an image file Pillow can identify"):
        write_shards(tmp_path / "broken", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _sampler(world_size: int, rank: int, batch_size: int, epoch: int = 0) -> ShardSampler:
    sampler = ShardSampler(
        [5, 7, 6, 6],
        shuffle=True,
        seed=3,
        batch_size=batch_size,
        rank=rank,
        world_size=world_size,
        drop_last=True,
    )
    sampler.set_epoch(epoch)
    return sampler


def test_the_librarys_order_is_the_same_in_every_sampler_and_new_each_epoch() -> None:
    first, again = list(_sampler(1, 0, 4)), list(_sampler(1, 0, 4))
    assert first == again
    assert sorted(first) == list(range(24))
    assert first != list(range(24))
    assert list(_sampler(1, 0, 4, epoch=1)) != first


def test_ranks_get_equal_disjoint_shares_of_every_sample() -> None:
    shares = [list(_sampler(2, rank, 2)) for rank in (0, 1)]
    assert [len(share) for share in shares] == [12, 12]
    assert sorted(shares[0] + shares[1]) == list(range(24))


def _global_batches(world_size: int, batch_size: int, start: int = 0) -> list[set[int]]:
    """The samples of each global batch (every rank's batch of one step), after each
    rank skipped ``start`` samples."""
    shares = []
    for rank in range(world_size):
        sampler = _sampler(world_size, rank, batch_size)
        sampler.set_start(start)
        shares.append(list(sampler))
    steps = len(shares[0]) // batch_size
    return [
        {i for share in shares for i in share[step * batch_size : (step + 1) * batch_size]}
        for step in range(steps)
    ]


def test_the_global_batches_are_the_same_on_one_two_and_four_ranks() -> None:
    one = _global_batches(1, 8)
    assert len(one) == 3
    assert _global_batches(2, 4) == one
    assert _global_batches(4, 2) == one


def test_a_resume_skips_exactly_the_samples_taken_on_the_same_number_of_ranks() -> None:
    for rank in (0, 1):
        whole = list(_sampler(2, rank, 2))
        resumed = _sampler(2, rank, 2)
        resumed.set_start(6)
        assert len(resumed) == 6
        assert list(resumed) == whole[6:]
        assert list(resumed) == whole  # the skip is used up by one pass


def test_a_resume_on_another_number_of_ranks_sees_the_remaining_global_batches() -> None:
    one = _global_batches(1, 8)
    assert _global_batches(2, 4, start=4) == one[1:]  # one step of 8 taken on 1 rank
    assert _global_batches(1, 8, start=8) == _global_batches(4, 2, start=2) == one[1:]


def _train(run: Path, shards: Path, *overrides: str) -> None:
    cfg = load_config(
        RECIPE,
        [*SMALL, f"data.shards.path={shards}", f"checkpoint.dir={run}", *overrides],
    )
    SSLTrainer(cfg).train()


def test_a_run_stopped_mid_phase_resumes_as_if_never_stopped(shards: Path, tmp_path: Path) -> None:
    reference, run = tmp_path / "reference", tmp_path / "run"
    _train(reference, shards)
    stop = "hooks.extra=[{name: request_stop, params: {rank: 0, at_iteration: 5}}]"
    with pytest.raises(PreemptedError):
        _train(run, shards, "trainer.imports=[tests.failure_hooks]", stop)
    stopped = newest_valid_checkpoint(run)[1]
    assert (stopped["iteration"], stopped["phase_done"]) == (5, False)  # step 2 of 3
    _train(run, shards)
    expected, resumed = (newest_valid_checkpoint(path)[1] for path in (reference, run))
    assert resumed["iteration"] == expected["iteration"] == 6
    for name, value in expected["model"].items():
        assert torch.equal(resumed["model"][name], value), name


def _train_two_ranks(run: Path, shards: Path, *overrides: str) -> int:
    """A run of the recipe on 2 gloo ranks (the local launcher); its exit status."""
    command = [sys.executable, "-m", "hookbus", "train", str(RECIPE), *SMALL]
    command += [f"data.shards.path={shards}", f"checkpoint.dir={run}", *overrides]
    command += ["distributed.nproc_per_node=2", "distributed.backend=gloo", "-q"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode in (0, PREEMPTED_EXIT_STATUS), done.stdout + done.stderr
    return done.returncode


def _recording(log: Path, stop_at: int | None = None) -> tuple[str, str]:
    """The overrides that write down each rank's samples at ``log`` and, with
    ``stop_at``, stop the run at that train iteration as a preemption would."""
    extra = f"{{name: record_samples, params: {{path: '{log}'}}}}"
    if stop_at is not None:
        extra += f", {{name: request_stop, params: {{rank: 0, at_iteration: {stop_at}}}}}"
    return "trainer.imports=[tests.sample_log,tests.failure_hooks]", f"hooks.extra=[{extra}]"


@pytest.mark.slow
def test_a_run_stopped_mid_phase_resumes_on_another_number_of_ranks(
    shards: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """2 ranks x 2 stopped at step 1 of 3 of the second phase go on as 1 rank x 4, and
    1 x 4 stopped at step 2 go on as 2 x 2: every global batch, the resumed ones
    included, holds the samples of an uninterrupted run's, none read twice."""
    _train(tmp_path / "reference", shards, *_recording(tmp_path / "reference.log"))
    expected = global_batches(tmp_path / "reference.log")
    assert sorted(expected) == [1, 2, 3, 4, 5, 6]
    assert all(len(batch) == 4 for batch in expected.values())
    assert sorted(i for step in (4, 5, 6) for i in expected[step]) == list(range(12))

    two_then_one, log = tmp_path / "two_then_one", tmp_path / "two_then_one.log"
    status = _train_two_ranks(two_then_one, shards, "data.batch_size=2", *_recording(log, 4))
    assert status == PREEMPTED_EXIT_STATUS
    stopped = newest_valid_checkpoint(two_then_one)[1]
    assert (stopped["iteration"], stopped["phase_done"], stopped["world_size"]) == (4, False, 2)
    with caplog.at_level("WARNING", logger="hookbus"):
        _train(two_then_one, shards, *_recording(log))
    assert "trained by 2 processes; this run goes on with 1 and the same global batch of 4" in (
        caplog.text
    )
    assert global_batches(log) == expected

    one_then_two, log = tmp_path / "one_then_two", tmp_path / "one_then_two.log"
    with pytest.raises(PreemptedError):
        _train(one_then_two, shards, *_recording(log, 5))
    assert _train_two_ranks(one_then_two, shards, "data.batch_size=2", *_recording(log)) == 0
    resumed = newest_valid_checkpoint(one_then_two)[1]
    assert (resumed["iteration"], resumed["phase_done"], resumed["world_size"]) == (6, True, 2)
    assert global_batches(log) == expected


def test_shards_resumed_on_another_number_of_ranks_must_keep_the_global_batch(
    shards: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with pytest.raises(PreemptedError):
        _train(run, shards, *_recording(tmp_path / "log", 2))
    checkpoint = newest_valid_checkpoint(run)[1]
    cfg = load_config(RECIPE, [*SMALL, f"data.shards.path={shards}", f"checkpoint.dir={run}"])
    with pytest.raises(ConfigError, match="global batch: data.batch_size=2\\)"):
        check_world_size(checkpoint, cfg, 2, "ckpt")
    assert check_world_size(checkpoint, cfg.model_copy(deep=True), 1, "ckpt") is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.pipeline=batch"], "data.name shards needs data.pipeline: crop_first or"),
        (["data.shards.path=null"], "data.shards.path: data.name shards needs the shards'"),
        (["data.shards.path=s3://Bad_Bucket/x"], "is not an s3://BUCKET/PREFIX URL"),
        (["data.shards.path=s3://bucket/train"], "data.shards.cache_dir: shards at an s3://"),
    ],
)
def test_what_shards_cannot_read_is_refused_naming_the_key(
    overrides: list[str], message: str, shards: Path
) -> None:
    cfg = load_config(RECIPE, [*SMALL, f"data.shards.path={shards}", *overrides])
    with pytest.raises(ConfigError, match=message):
        datasets.DATASETS.get("shards")(cfg.data)


def test_a_folder_without_shards_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data.shards.path: .* holds no index.json"):
        build_shards(str(tmp_path), None, None)


def test_without_the_streaming_library_shards_name_the_extra(
    monkeypatch: pytest.MonkeyPatch, shards: Path
) -> None:
    found = datasets.importlib.util.find_spec
    monkeypatch.setattr(
        datasets.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "streaming" else found(name, *args),
    )
    cfg = load_config(RECIPE, [*SMALL, f"data.shards.path={shards}"])
    with pytest.raises(ConfigError, match=r"pip install 'hookbus\[shards\]'"):
        datasets.DATASETS.get("shards")(cfg.data)


def test_the_throughput_benchmark_reads_every_photo_from_the_folder_and_the_shards(
    tmp_path: Path,
) -> None:
    from benchmarks.bench_shards import contenders
    from benchmarks.photo_folder import write_photo_folder

    folder = write_photo_folder(tmp_path / "photos", 4, size=(60, 45))
    write_shards(folder, tmp_path / "shards")
    rates = contenders(folder, tmp_path / "shards", batch_size=2, workers=0)
    assert sorted(rates) == [
        "folder crop_first",
        "folder torchvision",
        "shards crop_first",
        "shards torchvision",
    ]
    assert all(rate() > 0 for rate in rates.values())


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"version": 2}, "index.json is not a shard index (version 2 with a list of shards)"),
        ("[1, 2]", "index.json is list, not an object"),
    ],
)
def test_an_index_that_is_not_a_shard_index_is_one_line(
    index: object, message: str, shards: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / CLASSES_FILE).write_text((shards / CLASSES_FILE).read_text())
    (folder / "index.json").write_text(index if isinstance(index, str) else json.dumps(index))
    with pytest.raises(DataError, match=re.escape(message)):
        ShardDataset(str(folder), None)


def test_a_shard_file_name_that_leaves_the_folder_is_refused(shards: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / CLASSES_FILE).write_text((shards / CLASSES_FILE).read_text())
    index = json.loads((shards / "index.json").read_text())
    index["shards"][0]["raw_data"]["basename"] = "../../elsewhere.mds"
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(DataError, match=r"shard file name '../../elsewhere.mds' is not a name"):
        ShardDataset(str(folder), None)


@pytest.mark.parametrize("pipeline", ["crop_first", "torchvision"])
def test_test_views_from_shards_equal_those_from_the_folder(
    pipeline: str, photos: Path, shards: Path
) -> None:
    from hookbus.parts.data.build import build_data_loaders

    common = [*SMALL, f"data.pipeline={pipeline}"]
    folder = f"data.folder.train_dir={photos / 'train'}"
    on_folder, on_shards = (
        build_data_loaders(load_config(RECIPE, [*common, *source]))["test"]
        for source in (
            ["data.name=image_folder", folder, f"data.folder.test_dir={photos / 'train'}"],
            [f"data.shards.path={shards}"],
        )
    )
    [expected], [batch] = list(on_folder), list(on_shards)
    for key in ("views", "image"):
        for mine, theirs in zip(batch[key], expected[key], strict=True):
            assert torch.equal(mine, theirs), key

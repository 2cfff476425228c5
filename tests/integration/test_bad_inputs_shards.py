"""The bad-input table of shard sets: each class of docs/reliability.md's table tried on
a shard set read by ``data.name: shards`` and on ``hookbus shard`` writing one.

Reading: a copy of the real photographs' shards (tests/integration/conftest.py) is
damaged one way per row and given to ``hookbus train``; every row must be one line
naming the file, exit status 2, before the first step. Writing: ``hookbus shard`` onto
a full or read-only tmpfs, killed in the middle, and from a folder with a symbolic link
loop: one line (exit 1 for the machine's failures, 2 for the user's), nothing named
OUT left, and a rerun that equals a clean run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from streaming.base.format import MDSWriter

from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import InputChangedError
from hookbus.parts.data.shards import CLASSES_FILE, ShardDataset
from hookbus.shard import write_shards
from tests.disk_mounts import fill, small_tmpfs
from tests.integration.test_shards import RECIPE, SMALL

ROOT = Path(__file__).resolve().parents[2]
INDEX = "index.json"


def _index(folder: Path) -> dict:
    return json.loads((folder / INDEX).read_text())


def _set_index(folder: Path, change: Callable[[dict], None]) -> None:
    index = _index(folder)
    change(index)
    (folder / INDEX).write_text(json.dumps(index))


def _first(folder: Path) -> Path:
    return folder / _index(folder)["shards"][0]["raw_data"]["basename"]


def _entry(key: str, value: object) -> Callable[[Path], None]:
    """The first shard's index entry with ``key`` (``raw_data.bytes``) set to ``value``."""

    def change(index: dict) -> None:
        target = index["shards"][0]
        *parents, last = key.split(".")
        for name in parents:
            target = target[name]
        target[last] = value

    return lambda folder: _set_index(folder, change)


def _replace_first(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        shard = _first(folder)
        shard.unlink()
        make(shard)

    return plant


def _rewrite_first(change: Callable[[bytearray], bytes]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        shard = _first(folder)
        shard.write_bytes(change(bytearray(shard.read_bytes())))

    return plant


def _garble(data: bytearray) -> bytes:
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


def _no_hashes(folder: Path) -> None:
    def change(index: dict) -> None:
        for shard in index["shards"]:
            shard["hashes"], shard["raw_data"]["hashes"] = [], {}

    _set_index(folder, change)


def _not_an_image(folder: Path) -> None:
    """The first sample's image bytes turned to zeros, the shard's SHA-256 recorded anew:
    a shard that fits its index and holds an image no decoder reads."""
    import hashlib

    shard = _first(folder)
    data = bytearray(shard.read_bytes())
    count = int.from_bytes(data[:4], "little")
    start = int.from_bytes(data[4:8], "little")
    length = int.from_bytes(data[start : start + 4], "little")
    data[start + 4 : start + 4 + length] = bytes(length)
    shard.write_bytes(bytes(data))

    def change(index: dict) -> None:
        entry = index["shards"][0]
        assert entry["samples"] == count
        entry["raw_data"]["hashes"]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()

    _set_index(folder, change)


def _then(*plants: Callable[[Path], None]) -> Callable[[Path], None]:
    def plant(folder: Path) -> None:
        for step in plants:
            step(folder)

    return plant


def _sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(8 << 30)


def _classes(value: object) -> Callable[[Path], None]:
    return lambda folder: (folder / CLASSES_FILE).write_text(json.dumps(value))


def _other_writer(columns: dict[str, str], sample: dict, **options: object) -> Callable:
    """A set written by the streaming library with another writer's ``columns``."""

    def plant(folder: Path) -> None:
        for path in folder.iterdir():
            if path.name != CLASSES_FILE:
                path.unlink()
        other = folder.with_name("other")
        writer = MDSWriter(out=str(other), columns=columns, **options)
        for _ in range(3):
            writer.write(sample)
        writer.finish()
        for path in other.iterdir():
            path.rename(folder / path.name)

    return plant


@dataclass(frozen=True)
class Row:
    """One bad input: its class, what is planted, and what the error line names."""

    kind: str
    plant: Callable[[Path], None]
    names: str


SHARD = "shard.00000.mds"
READ_ROWS = {
    "missing index": Row("missing", lambda f: (f / INDEX).unlink(), "holds no index.json"),
    "missing shard": Row("missing", lambda f: _first(f).unlink(), f"shard not found: .*{SHARD}"),
    "missing class list": Row(
        "missing", lambda f: (f / CLASSES_FILE).unlink(), f"class list not found: .*{CLASSES_FILE}"
    ),
    "empty index": Row("empty", lambda f: (f / INDEX).write_text(""), "index.json is not JSON"),
    "empty shard": Row(
        "empty", _rewrite_first(lambda d: b""), f"{SHARD} is 0 bytes, its index says \\d+"
    ),
    "truncated shard": Row(
        "truncated",
        _rewrite_first(lambda d: bytes(d[: len(d) // 2])),
        f"{SHARD} is \\d+ bytes, its index says \\d+: truncated",
    ),
    "truncated index": Row(
        "truncated",
        lambda f: (f / INDEX).write_text((f / INDEX).read_text()[:100]),
        "index.json is not JSON",
    ),
    "garbled shard": Row(
        "garbled", _rewrite_first(_garble), f"{SHARD} does not match its sha256 in index.json"
    ),
    "zero-filled shard": Row(
        "garbled",
        _rewrite_first(lambda d: bytes(len(d))),
        f"{SHARD} does not match its sha256 in index.json",
    ),
    "zero-filled shard, no hashes": Row(
        "garbled",
        _then(_no_hashes, _rewrite_first(lambda d: bytes(len(d)))),
        f"{SHARD} does not hold the \\d+ samples its index says",
    ),
    "garbled sample table, no hashes": Row(
        "garbled",
        _then(_no_hashes, _rewrite_first(lambda d: bytes(d[:8]) + b"\xff\xff" + bytes(d[10:]))),
        f"{SHARD} has a garbled sample table",
    ),
    "an image in a shard that is no image": Row(
        "garbled",
        _not_an_image,
        f"cannot read image .*{SHARD} sample 0: not an image file Pillow can identify",
    ),
    "index a list": Row("wrong type", lambda f: (f / INDEX).write_text("[1, 2]"), "is list, not"),
    "sample count a string": Row(
        "wrong type", _entry("samples", "12"), "shard 0 sample count is '12': give an integer"
    ),
    "sample count negative": Row(
        "huge claim", _entry("samples", -1), "shard 0 sample count is '-1': give an integer"
    ),
    "sample count huge": Row(
        "huge claim", _entry("samples", 10**12), "shard 0 sample count is '1000000000000'"
    ),
    "shard size huge": Row(
        "huge claim", _entry("raw_data.bytes", 10**15), "shard 0 size is '1000000000000000'"
    ),
    "shard size a float": Row("wrong type", _entry("raw_data.bytes", 4096.0), "shard 0 size is"),
    "index nested deep": Row(
        "deep nesting",
        lambda f: (f / INDEX).write_text("[" * 100_000 + "]" * 100_000),
        "nested deeper than 6 levels",
    ),
    "index huge": Row(
        "huge claim",
        lambda f: (f / INDEX).write_text(" " * (65 << 20)),
        "shard index .* is 65.0 MiB, over hookbus's limit of 64.0 MiB",
    ),
    "sparse 8 GiB shard": Row(
        "sparse file",
        _replace_first(_sparse),
        f"shard .*{SHARD} is 8.0 GiB, over hookbus's limit of \\d",
    ),
    "sparse 8 GiB index": Row(
        "sparse file",
        lambda f: ((f / INDEX).unlink(), _sparse(f / INDEX)),
        "shard index .* is 8.0 GiB, over hookbus's limit of 64.0 MiB",
    ),
    "shard a FIFO": Row("FIFO", _replace_first(os.mkfifo), f"{SHARD} is a FIFO \\(named pipe\\)"),
    "index a FIFO": Row(
        "FIFO", lambda f: ((f / INDEX).unlink(), os.mkfifo(f / INDEX)), "index.json is a FIFO"
    ),
    "class list a FIFO": Row(
        "FIFO",
        lambda f: ((f / CLASSES_FILE).unlink(), os.mkfifo(f / CLASSES_FILE)),
        f"{CLASSES_FILE} is a FIFO",
    ),
    "shard a link to /dev/zero": Row(
        "/dev/zero link",
        _replace_first(lambda p: p.symlink_to("/dev/zero")),
        f"{SHARD} is a character device",
    ),
    "shard a symbolic link loop": Row(
        "symlink loop",
        _replace_first(lambda p: p.symlink_to(p)),
        f"cannot read shard .*{SHARD}: Too many levels of symbolic links",
    ),
    "shard a folder": Row(
        "directory for a file", _replace_first(lambda p: p.mkdir()), f"{SHARD} is a directory"
    ),
    "class list not a list": Row(
        "wrong type", _classes({"classes": "china"}), "is not {'classes': \\[a list of names\\]}"
    ),
    "class list of numbers": Row(
        "wrong type", _classes({"classes": [1, 2]}), "is not {'classes': \\[a list of names\\]}"
    ),
    "class list nested deep": Row(
        "deep nesting", _classes({"classes": [[["x"]]]}), "nested deeper than 2 levels"
    ),
    "class list names too few": Row(
        "wrong type",
        _classes({"classes": ["china"]}),
        "sample \\d+ has the label 1, but the class list names 1 classes",
    ),
    "class list empty for labelled shards": Row(
        "wrong type",
        _classes({"classes": []}),
        "sample 0 has the label 0, but the class list names no classes",
    ),
    "another writer's string labels": Row(
        "another writer",
        _other_writer({"image": "bytes", "label": "str"}, {"image": b"x", "label": "cat"}),
        "has the columns {'image': 'bytes', 'label': 'str'}, not hookbus shard's",
    ),
    "another writer's set without labels": Row(
        "another writer",
        _other_writer({"image": "bytes"}, {"image": b"x"}),
        "has the columns {'image': 'bytes'}, not hookbus shard's",
    ),
    "another writer's compressed set": Row(
        "another writer",
        _other_writer(
            {"image": "bytes", "label": "int"}, {"image": b"x", "label": 0}, compression="zstd"
        ),
        "shard 0 is compressed: hookbus reads uncompressed shards",
    ),
    "a shard name that leaves the folder": Row(
        "name leaving its folder",
        _entry("raw_data.basename", "../../etc/passwd"),
        "shard file name '../../etc/passwd' is not a name",
    ),
    "an absolute shard name": Row(
        "name leaving its folder",
        _entry("raw_data.basename", "/dev/zero"),
        "shard file name '/dev/zero' is not a name",
    ),
}
"""Every class of bad input that applies to a local shard set's files."""


def _train(folder: Path, run: Path) -> list[str]:
    return ["train", str(RECIPE), *SMALL, f"data.shards.path={folder}", f"checkpoint.dir={run}"]


@pytest.mark.parametrize("name", sorted(READ_ROWS))
def test_a_bad_shard_set_is_one_line_naming_the_file_before_the_first_step(
    name: str, shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(shutil.copytree(shards, tmp_path / "set"))
    READ_ROWS[name].plant(folder)
    assert main([*_train(folder, tmp_path / "run"), "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("hookbus train: error: "), err
    assert re.search(READ_ROWS[name].names, err), err
    assert not list((tmp_path / "run").glob("*.torch"))


def test_a_set_without_hashes_is_read_with_a_warning_naming_it(
    shards: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = Path(shutil.copytree(shards, tmp_path / "set"))
    _no_hashes(folder)
    assert len(ShardDataset(str(folder), None)) == 12
    assert f"the shards at {folder} record no hash" in caplog.text


def test_every_shard_hookbus_writes_records_its_sha256(shards: Path) -> None:
    import hashlib

    for entry in _index(shards)["shards"]:
        data = (shards / entry["raw_data"]["basename"]).read_bytes()
        assert entry["raw_data"]["hashes"] == {"sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_a_shard_changed_during_the_run_is_one_line_exit_1_and_the_checkpoint_stays(
    workers: int, shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The set passes its checks; after the run's 2nd step a hook garbles the sample
    table of every shard (as another program rewriting the set would): the 3rd step's
    read is one line naming the shard and the sample, exit status 1, and the checkpoint
    of step 2 is the newest and intact; read in this process or in a loader worker (whose
    batches read ahead may include the 3rd)."""
    folder, run = Path(shutil.copytree(shards, tmp_path / "set")), tmp_path / "run"
    extra = f"hooks.extra=[{{name: garble_shards, params: {{folder: '{folder}', at: 2}}}}]"
    imports = "trainer.imports=[tests.integration.shard_tamper]"
    loader = f"data.num_workers={workers}"
    assert main([*_train(folder, run), imports, extra, loader, "-q"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert re.match(
        r"hookbus train: error: shard .*shard\.\d+\.mds sample \d+: changed since it was "
        r"checked \(\d+ bytes, not \d+\)$",
        err,
    ), err
    newest = newest_valid_checkpoint(run)
    # a worker may have read the 3rd batch before the change: the 4th read fails then
    assert newest is not None and newest[1]["iteration"] in ((2,) if workers == 0 else (2, 3))


def _garble_table(shard: Path) -> None:
    """Every offset of the sample table of ``shard`` set to 0xFFFFFFFF."""
    data = shard.read_bytes()
    end = 4 + 4 * (int.from_bytes(data[:4], "little") + 1)
    shard.write_bytes(data[:4] + b"\xff" * (end - 4) + data[end:])


CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a label rewritten": (
        lambda p: p.write_bytes(p.read_bytes()[:-8] + (7).to_bytes(8, "little")),
        "the label 7 is not in the class list",
    ),
    "the sample table garbled": (_garble_table, "a garbled sample table"),
    "replaced by a FIFO": (lambda p: (p.unlink(), os.mkfifo(p)), "is a FIFO"),
    "removed": (lambda p: p.unlink(), "shard not found"),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_shard_changed_after_its_checks_names_the_shard_and_sample(
    name: str, shards: Path, tmp_path: Path
) -> None:
    folder = Path(shutil.copytree(shards, tmp_path / "set"))
    data = ShardDataset(str(folder), None)
    shard = _first(folder)
    CHANGES[name][0](shard)
    last = data.shard_sizes[0] - 1
    with pytest.raises(InputChangedError, match=rf"^shard {shard} sample {last}: changed since "):
        data[last]
    with pytest.raises(InputChangedError, match=re.escape(CHANGES[name][1])):
        data[last]


# Writing: hookbus shard.


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_a_written_set_is_the_same_bytes_every_time(photos: Path, tmp_path: Path) -> None:
    write_shards(photos / "train", tmp_path / "a", shard_bytes=4096)
    write_shards(photos / "train", tmp_path / "b", shard_bytes=4096)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no partial folder left


@pytest.mark.parametrize("place", ["full", "read-only"])
def test_shard_onto_a_full_or_read_only_disk_is_one_line_exit_1_and_nothing_named_out(
    place: str, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a real 64 KiB tmpfs (mounted by the test): filled to the last byte, or
    mounted read-only. Then the same command onto a place with room equals a clean run."""
    disk = tmp_path / "disk"
    with small_tmpfs(disk, read_only=place == "read-only"):
        if place == "full":
            fill(disk)
        out = disk / "shards"
        assert main(["shard", str(photos / "train"), str(out), "--shard-bytes", "4096"]) == 1
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        reason = "No space left on device" if place == "full" else "Read-only file system"
        assert err.startswith(f"hookbus shard: error: cannot write {disk}"), err
        assert reason in err and f"nothing was written to {out}" in err, err
        assert sorted(p.name for p in disk.iterdir()) == (["filler"] if place == "full" else [])
    clean, again = tmp_path / "clean", tmp_path / "again"
    write_shards(photos / "train", clean, shard_bytes=4096)
    assert main(["shard", str(photos / "train"), str(again), "--shard-bytes", "4096"]) == 0
    assert _tree(again) == _tree(clean)


def test_a_disk_that_fills_while_the_shards_are_written_leaves_nothing_named_out(
    photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 64 KiB tmpfs with room for two of the three shards (4 KiB pages)."""
    disk = tmp_path / "disk"
    with small_tmpfs(disk, size_kib=64):
        (disk / "filler").write_bytes(bytes(56 << 10))
        out = disk / "shards"
        assert main(["shard", str(photos / "train"), str(out), "--shard-bytes", "4096"]) == 1
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        assert f"cannot write {out}: No space left on device" in err, err
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


KILLED_WRITER = """
import os, signal, sys
from streaming.base.format import MDSWriter
from hookbus.cli import main
write, count = MDSWriter.write, [0]
def write_then_die(self, sample):
    count[0] += 1
    if count[0] == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    write(self, sample)
MDSWriter.write = write_then_die
sys.exit(main(sys.argv[1:]))
"""
"""``hookbus shard`` killed (SIGKILL) as it writes its 7th image of 12."""


@pytest.mark.slow
def test_shard_killed_mid_write_leaves_nothing_named_out_and_a_rerun_equals_a_clean_run(
    photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "shards"
    args = ["shard", str(photos / "train"), str(out), "--shard-bytes", "4096"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, *args], env=env, capture_output=True, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    left = [path.name for path in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".shards.partial-"), left
    assert any((tmp_path / left[0]).iterdir())  # shards were being written
    assert main(args) == 0
    assert [path.name for path in tmp_path.iterdir()] == ["shards"]  # the partial one removed
    write_shards(photos / "train", tmp_path / "clean", shard_bytes=4096)
    assert _tree(out) == _tree(tmp_path / "clean")


def test_shard_from_a_folder_with_a_symlink_loop_is_one_line_naming_it(
    photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(shutil.copytree(photos / "train", tmp_path / "photos"))
    (folder / "china" / "again").symlink_to(folder / "china")
    assert main(["shard", str(folder), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert f"image folder {folder / 'china' / 'again'} is a symbolic link loop" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda p: p.write_text("x"), "already exists and is not an empty folder"),
        (lambda p: p.symlink_to(p), "already exists and is not an empty folder"),
    ],
    ids=["a file", "a symbolic link loop"],
)
def test_shard_onto_an_output_that_is_no_empty_folder_is_refused(
    make: Callable[[Path], None],
    named: str,
    photos: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    make(out)
    assert main(["shard", str(photos / "train"), str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and named in err, err


WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
"""As root: without the capabilities to read any file and enter any folder."""


@pytest.mark.slow
def test_an_unreadable_shard_is_one_line_before_the_first_step(
    shards: Path, tmp_path: Path
) -> None:
    """In a ``hookbus train`` process for which permissions hold (root's override
    dropped with setpriv): a real mode 000 shard."""
    folder = Path(shutil.copytree(shards, tmp_path / "set"))
    shard = _first(folder)
    shard.chmod(0)
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "hookbus", *_train(folder, tmp_path / "run"), "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"hookbus train: error: cannot read shard {shard}: Permission denied\n"

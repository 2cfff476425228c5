"""``hookbus eval``'s inputs and outputs tried with each class of bad input that applies
(/work/shared/BAD_INPUTS.md's list): the labelled folder, the feature cache, the output
folder and ``eval.json``. Each case is refused in one line with exit status 2 (a user
error) or 1 (the machine failed), never a traceback, and leaves no ``eval.json``; a bad
cache is said in a warning and computed again."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import hookbus.eval
from hookbus.cli import main
from hookbus.eval_cache import CACHE_DIR
from tests.disk_mounts import fill, small_tmpfs
from tests.eval_runs import TINY, photo_settings, write_run
from tests.photos import make_photo_folder


@dataclass(frozen=True)
class Case:
    """A bad input: what it is, how it is made in a copy of the photos (``data``) or in
    the output folder (``out``), the exit status and the words the one line holds."""

    surface: str
    kind: str
    make: Callable[[Path], object]
    status: int
    named: str


def replace_with(path: Path, make: Callable[[Path], object]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def first_image(data: Path) -> Path:
    return data / "test" / "china" / "000.jpg"


DATA_CASES = [
    Case("labelled folder", "missing", lambda d: shutil.rmtree(d), 2, "not found"),
    Case("labelled folder", "empty", lambda d: replace_with(d, Path.mkdir), 2, "has no train/"),
    Case(
        "labelled folder",
        "a file where the folder belongs",
        lambda d: replace_with(d, lambda p: p.write_text("x")),
        2,
        "is not a folder",
    ),
    Case(
        "labelled folder",
        "no test split",
        lambda d: shutil.rmtree(d / "test"),
        2,
        "has no test/ folder",
    ),
    Case(
        "labelled folder",
        "unlabelled (flat) images",
        lambda d: (
            [
                shutil.move(p, d / "train" / p.name.replace(".", f"_{p.parent.name}."))
                for p in sorted((d / "train").rglob("*.jpg"))
            ]
            and [shutil.rmtree(d / "train" / c) for c in ("china", "flower")]
        ),
        2,
        "have no labels",
    ),
    Case(
        "labelled folder",
        "a test class the train split lacks",
        lambda d: shutil.copytree(d / "test" / "china", d / "test" / "zebra"),
        2,
        "is not a class of the train folder",
    ),
    Case(
        "labelled folder",
        "empty image file",
        lambda d: first_image(d).write_bytes(b""),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "truncated image",
        lambda d: first_image(d).write_bytes(first_image(d).read_bytes()[:200]),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "garbled bytes in the middle",
        lambda d: first_image(d).write_bytes(
            first_image(d).read_bytes()[:300] + os.urandom(600) + first_image(d).read_bytes()[900:]
        ),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "text named like an image",
        lambda d: first_image(d).write_text("not an image"),
        2,
        "cannot read image",
    ),
    Case(
        "labelled folder",
        "a FIFO named like an image",
        lambda d: replace_with(first_image(d), os.mkfifo),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "a link to /dev/zero",
        lambda d: replace_with(first_image(d), lambda p: p.symlink_to("/dev/zero")),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "a sparse 8 GB image",
        lambda d: replace_with(first_image(d), lambda p: os.truncate(p.open("wb").name, 8 << 30)),
        2,
        "000.jpg",
    ),
    Case(
        "labelled folder",
        "a broken link",
        lambda d: replace_with(first_image(d), lambda p: p.symlink_to(d / "nothing.jpg")),
        2,
        "broken symbolic link",
    ),
    Case(
        "labelled folder",
        "a symlink loop",
        lambda d: (d / "train" / "china" / "loop").symlink_to(".."),
        2,
        "loop is a symbolic link loop",
    ),
    Case(
        "labelled folder",
        "a folder named like an image (a folder: walked into, accepted)",
        lambda d: replace_with(first_image(d), Path.mkdir),
        0,
        "",
    ),
]


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """6 + 6 photographs per class and a run on them (24 px)."""
    root = tmp_path_factory.mktemp("bad")
    folder = make_photo_folder(root / "photos", per_class=6, size=24)
    run_dir = root / "run"
    write_run(run_dir, photo_settings(folder, size=24))
    return folder, run_dir


def refused(status: int, named: str, err: str) -> None:
    assert err.startswith("hookbus eval: error: "), err
    assert named in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("case", DATA_CASES, ids=lambda case: case.kind)
def test_a_bad_labelled_folder_is_one_line(
    case: Case, photos: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, run_dir = photos
    data = tmp_path / "data"
    shutil.copytree(folder, data)
    case.make(data)
    out = tmp_path / "out"
    assert main(["eval", str(run_dir), str(data), "--out", str(out), "-q"]) == case.status
    if case.status == 0:
        assert json.loads((out / "eval.json").read_text())["test_images"] == 11
        return
    refused(case.status, case.named, capsys.readouterr().err)
    assert not (out / "eval.json").exists()


def test_data_the_encoder_cannot_read_is_refused(
    photos: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, run_dir = photos
    assert main(["eval", str(run_dir), "digits", "--out", str(tmp_path), "-q"]) == 2
    refused(2, "the digits are for encoders trained on them", capsys.readouterr().err)
    tiny = tmp_path / "tiny"
    write_run(tiny, TINY)
    assert main(["eval", str(tiny), str(folder), "-q"]) == 2
    refused(2, "evaluate it on its own data (no DATA argument)", capsys.readouterr().err)
    no_test = tmp_path / "no_test"
    settings = photo_settings(folder, size=24)
    settings["data"]["folder"] = {"train_dir": str(folder / "train")}
    write_run(no_test, settings)
    assert main(["eval", str(no_test), "-q"]) == 2
    refused(2, "the run's data has no test folder", capsys.readouterr().err)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("cache") / "run"
    write_run(run_dir, TINY)
    assert main(["eval", str(run_dir), "-q"]) == 0
    return run_dir


def cache_file(run_dir: Path) -> Path:
    (path,) = (run_dir / CACHE_DIR).iterdir()
    return path


def rewritten(path: Path, change: Callable[[dict], None]) -> None:
    saved = torch.load(path, weights_only=True)
    change(saved)
    torch.save(saved, path)


def claims_a_huge_matrix(path: Path) -> None:
    """The cache with its test features' storage claiming 2**31 - 1 floats (8 GiB) and
    their shape as many rows, its bytes unchanged: nothing that size may be allocated."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename.endswith("data.pkl"):
                data = re.sub(rb"K\x10\x86", b"J\xff\xff\xff\x07K\x10\x86", data)
                data = re.sub(rb"(K[\x01-\xff]|M..)t", b"J\xff\xff\xff\x7ft", data)
            new.writestr(item, data)
    path.write_bytes(buffer.getvalue())


CACHE_RECOMPUTED = [
    ("a huge feature matrix claimed", claims_a_huge_matrix, "does not match expected size"),
    ("empty", lambda p: p.write_bytes(b""), "cannot be used"),
    ("truncated", lambda p: p.write_bytes(p.read_bytes()[:300]), "cannot be used"),
    ("garbled", lambda p: p.write_bytes(b"PK" + os.urandom(500)), "cannot be used"),
    ("another tool's file", lambda p: torch.save({"weights": torch.ones(2)}, p), "cannot be used"),
    (
        "NaN features",
        lambda p: rewritten(p, lambda s: s["test"]["features"]["backbone"].fill_(float("nan"))),
        "not all finite",
    ),
    (
        "features and labels of other lengths",
        lambda p: rewritten(
            p, lambda s: s["train"].update(labels=torch.zeros(3, dtype=torch.long))
        ),
        "do not match the labels",
    ),
    (
        "other settings",
        lambda p: rewritten(p, lambda s: s["settings"].update(images="other")),
        "was made for other settings",
    ),
]


@pytest.mark.parametrize(
    ("kind", "damage", "said"), CACHE_RECOMPUTED, ids=[c[0] for c in CACHE_RECOMPUTED]
)
def test_a_bad_cache_is_said_and_computed_again(
    tiny_run: Path,
    tmp_path: Path,
    kind: str,
    damage: Callable[[Path], object],
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir, symlinks=True)
    expected = json.loads((tiny_run / "eval.json").read_text())
    damage(cache_file(run_dir))
    assert main(["eval", str(run_dir), "-q"]) == 0
    assert said in capsys.readouterr().out
    found = json.loads((run_dir / "eval.json").read_text())
    assert found["cached_features"] is False
    assert found["knn"] == expected["knn"] and found["linear"] == expected["linear"]
    assert torch.load(cache_file(run_dir), weights_only=True)["format"].startswith("hookbus")


CACHE_REFUSED = [
    ("a folder", Path.mkdir, "is not a regular file"),
    ("a FIFO", os.mkfifo, "is not a regular file"),
    ("a link to /dev/zero", lambda p: p.symlink_to("/dev/zero"), "is not a regular file"),
    ("a link to itself", lambda p: p.symlink_to(p), "feature cache"),
]


@pytest.mark.parametrize(
    ("kind", "make", "named"), CACHE_REFUSED, ids=[c[0] for c in CACHE_REFUSED]
)
def test_a_cache_that_is_no_file_is_one_line(
    tiny_run: Path,
    tmp_path: Path,
    kind: str,
    make: Callable[[Path], object],
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir, symlinks=True)
    replace_with(cache_file(run_dir), make)
    (run_dir / "eval.json").unlink()
    assert main(["eval", str(run_dir), "-q"]) == 2
    refused(2, named, capsys.readouterr().err)
    assert not (run_dir / "eval.json").exists()


def test_a_cache_folder_that_is_a_file_is_one_line(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / CACHE_DIR).write_text("x")
    assert main(["eval", str(tiny_run), "--out", str(out), "-q"]) == 2
    refused(2, "feature cache folder", capsys.readouterr().err)


OUTPUTS = [
    ("--out is a file", lambda out: out.write_text("x"), 2, "is not a folder"),
    (
        "eval.json is a folder",
        lambda out: (out / "eval.json").mkdir(parents=True),
        2,
        "is a directory",
    ),
    (
        "eval.json is a link to /dev/full",
        lambda out: (out.mkdir(), (out / "eval.json").symlink_to("/dev/full")),
        2,
        "is a symbolic link (to /dev/full)",
    ),
]


@pytest.mark.parametrize(("kind", "make", "status", "named"), OUTPUTS, ids=[c[0] for c in OUTPUTS])
def test_a_bad_output_place_is_one_line(
    tiny_run: Path,
    tmp_path: Path,
    kind: str,
    make: Callable[[Path], object],
    status: int,
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    make(out)
    assert main(["eval", str(tiny_run), "--out", str(out), "-q"]) == status
    refused(status, named, capsys.readouterr().err)


def test_the_run_files_are_never_an_output(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "eval.json").symlink_to(tiny_run / "config.yaml")
    before = (tiny_run / "config.yaml").read_bytes()
    assert main(["eval", str(tiny_run), "--out", str(out), "-q"]) == 2
    refused(2, "is a symbolic link (to ", capsys.readouterr().err)
    assert (tiny_run / "config.yaml").read_bytes() == before
    (out / "eval.json").unlink()
    (out / "eval.json").hardlink_to(tiny_run / "config.yaml")
    assert main(["eval", str(tiny_run), "--out", str(out), "-q"]) == 2
    refused(2, "is a hard link", capsys.readouterr().err)
    assert (tiny_run / "config.yaml").read_bytes() == before


@pytest.mark.parametrize("read_only", [False, True], ids=["full disk", "read-only"])
def test_a_disk_that_fails_is_one_line_exit_1_and_nothing_half_written(
    tiny_run: Path, tmp_path: Path, read_only: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "disk", size_kib=64, read_only=read_only) as disk:
        if not read_only:
            fill(disk)
        assert main(["eval", str(tiny_run), "--out", str(disk / "out"), "-q"]) == 1
        refused(1, "cannot write", capsys.readouterr().err)
        assert not (disk / "out" / "eval.json").exists()
        written = [p for p in disk.rglob("*") if p.is_file() and p.name != "filler"]
        assert written == []


def test_an_image_removed_after_eval_listed_the_folder_is_one_line_and_no_eval_json(
    photos: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, run_dir = photos
    data = tmp_path / "data"
    shutil.copytree(folder, data)
    gone = data / "test" / "flower" / "001.jpg"
    listed = hookbus.eval.labelled_data

    def listed_then_removed(cfg: object, where: object) -> object:
        found = listed(cfg, where)  # type: ignore[arg-type]
        gone.unlink()
        return found

    monkeypatch.setattr(hookbus.eval, "labelled_data", listed_then_removed)
    out = tmp_path / "out"
    assert main(["eval", str(run_dir), str(data), "--out", str(out), "-q"]) == 2
    assert capsys.readouterr().err == f"hookbus eval: error: image not found: {gone}\n"
    assert not (out / "eval.json").exists()

"""A bad image file is one line naming it, with loader workers as without; a file or
folder that cannot be read is an error naming it, never left out.

Each corrupt file is read through both image-file pipelines (``torchvision``: the data
set decodes; ``crop_first``: the collate function decodes), in the training process
(``data.num_workers=0``) and in a worker process (1): the error is the same
:class:`DataError` with the same message, not torch's "Caught DataError in DataLoader
worker process 0. Original Traceback ...".
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from PIL import Image

from hookbus import DataError
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.parts.data import ImageFolderDataset, build_data_loaders
from hookbus.parts.data.loader import worker_message

PIPELINES = ("torchvision", "crop_first")


def photo_bytes(kind: str) -> bytes:
    """A small noisy RGB image encoded as ``kind`` (JPEG or PNG)."""
    image = Image.effect_noise((24, 20), 64).convert("RGB")
    encoded = io.BytesIO()
    image.save(encoded, kind)
    return encoded.getvalue()


def truncated_jpeg() -> bytes:
    data = photo_bytes("JPEG")
    return data[: len(data) // 2]


def png_with_a_bad_header_checksum() -> bytes:
    data = bytearray(photo_bytes("PNG"))
    header = data.index(b"IHDR")
    length = struct.unpack(">I", data[header - 4 : header])[0]
    data[header + 4 + length] ^= 0xFF  # the first byte of IHDR's CRC
    return bytes(data)


def png_with_broken_pixel_data() -> bytes:
    data = bytearray(photo_bytes("PNG"))
    data[data.index(b"IDAT") + 10] ^= 0xFF
    return bytes(data)


CORRUPT: dict[str, tuple[str, Callable[[], bytes]]] = {
    "truncated JPEG": ("bad.jpg", truncated_jpeg),
    "zero-byte file": ("bad.jpg", lambda: b""),
    "text file named .jpg": ("bad.jpg", lambda: b"hello, not an image\n"),
    "PNG with a bad header CRC": ("bad.png", png_with_a_bad_header_checksum),
    "PNG with broken pixel data": ("bad.png", png_with_broken_pixel_data),
}


def image_folder(root: Path, per_class: int = 3) -> Path:
    """``root/a`` and ``root/b``, each with ``per_class`` good PNG images."""
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for index in range(per_class):
            (root / name / f"good{index}.png").write_bytes(photo_bytes("PNG"))
    return root


def folder_config(root: Path, pipeline: str, workers: int) -> dict:
    return {
        "name": "image_folder",
        "pipeline": pipeline,
        "image_size": 16,
        "batch_size": 4,
        "test_batch_size": 4,
        "num_workers": workers,
        "folder": {"train_dir": str(root), "labels": "class_folders"},
    }


def read_all(root: Path, pipeline: str, workers: int) -> str:
    """The message of the DataError that reading every test batch raises."""
    cfg = validate_config({"data": folder_config(root, pipeline, workers)})
    loaders = build_data_loaders(cfg)
    with pytest.raises(DataError) as raised:
        for _ in loaders["test"]:
            pass
    return str(raised.value)


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_image_is_the_same_line_with_workers_as_without(
    tmp_path: Path, pipeline: str, case: str
) -> None:
    root = image_folder(tmp_path / "images")
    name, content = CORRUPT[case]
    (root / "b" / name).write_bytes(content())
    without_workers = read_all(root, pipeline, workers=0)
    with_a_worker = read_all(root, pipeline, workers=1)
    assert with_a_worker == without_workers
    assert with_a_worker.startswith(f"cannot read image {root / 'b' / name}: ")
    assert "\n" not in with_a_worker and "worker" not in with_a_worker


@pytest.fixture
def refuse_to_open(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """``refuse_to_open(path)``: opening ``path`` fails with EACCES, as for a file the
    user has no permission to read (the suite runs as root, which may read anything).
    Worker processes are forked, so they inherit it."""
    refused: set[str] = set()
    real_open, real_os_open = builtins.open, os.open

    def check(path: object) -> None:
        if isinstance(path, str | os.PathLike) and os.fspath(path) in refused:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    def guarded_open(file: object, *args: object, **kwargs: object) -> object:
        check(file)
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    def guarded_os_open(path: object, *args: object, **kwargs: object) -> int:
        check(path)
        return real_os_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    return lambda path: refused.add(str(path))


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_an_image_without_read_permission_is_named_with_workers_as_without(
    tmp_path: Path, pipeline: str, refuse_to_open: Callable[[Path], None]
) -> None:
    root = image_folder(tmp_path / "images")
    refuse_to_open(root / "b" / "good1.png")
    without_workers = read_all(root, pipeline, workers=0)
    assert read_all(root, pipeline, workers=1) == without_workers
    assert str(root / "b" / "good1.png") in without_workers
    assert "Permission denied" in without_workers


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_an_image_removed_after_the_listing_is_named_with_workers(
    tmp_path: Path, pipeline: str
) -> None:
    root = image_folder(tmp_path / "images")
    cfg = validate_config({"data": folder_config(root, pipeline, workers=1)})
    loaders = build_data_loaders(cfg)
    (root / "b" / "good2.png").unlink()
    (root / "b" / "good2.png").mkdir()
    with pytest.raises(DataError) as raised:
        list(loaders["test"])
    assert str(raised.value) == (
        f"image {root / 'b' / 'good2.png'} is a directory, not a regular file: "
        "hookbus reads only regular files"
    )


def test_a_broken_symbolic_link_named_like_an_image_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    root = image_folder(tmp_path / "images")
    (root / "a" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    with pytest.raises(DataError) as raised:
        ImageFolderDataset(root)
    assert str(raised.value) == (
        f"{root / 'a' / 'gone.jpg'} is a broken symbolic link (to {tmp_path}/nowhere.jpg)"
    )


def test_a_fifo_named_like_an_image_is_refused_naming_it(tmp_path: Path) -> None:
    root = image_folder(tmp_path / "images")
    os.mkfifo(root / "b" / "pipe.png")
    with pytest.raises(DataError, match=r"image .*/b/pipe\.png is a FIFO \(named pipe\), not a"):
        ImageFolderDataset(root)


def test_a_class_folder_that_cannot_be_listed_is_an_error_not_a_missing_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = image_folder(tmp_path / "images")
    locked = str(root / "b")
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str]) -> object:
        if os.fspath(path) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", locked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(DataError) as raised:
        ImageFolderDataset(root)
    assert str(raised.value) == f"cannot list image folder {locked}: Permission denied"


def test_a_subfolder_that_cannot_be_listed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = image_folder(tmp_path / "images")
    (root / "a" / "more").mkdir()
    locked = str(root / "a" / "more")
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str]) -> object:
        if os.fspath(path) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", locked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(DataError, match=f"^cannot list image folder {locked}: "):
        ImageFolderDataset(root)


def test_a_class_folder_without_images_is_refused_naming_it(tmp_path: Path) -> None:
    root = image_folder(tmp_path / "images")
    (root / "c").mkdir()
    (root / "c" / "notes.txt").write_text("no images here")
    with pytest.raises(DataError, match=rf"^class folder {root / 'c'} holds no images"):
        ImageFolderDataset(root, labels="class_folders")


def test_a_symbolic_link_loop_is_refused(tmp_path: Path) -> None:
    root = image_folder(tmp_path / "images")
    (root / "a" / "again").symlink_to(root / "a")
    with pytest.raises(DataError) as raised:
        ImageFolderDataset(root)
    assert str(raised.value) == (
        f"image folder {root / 'a' / 'again'} is a symbolic link loop: it leads back to "
        f"{root / 'a'}, a folder above it"
    )


def test_a_linked_class_folder_and_a_folder_named_like_an_image_are_read(
    tmp_path: Path,
) -> None:
    root = image_folder(tmp_path / "images")
    elsewhere = image_folder(tmp_path / "elsewhere")
    (root / "c").symlink_to(elsewhere / "a")
    (root / "a" / "album.jpg").mkdir()
    (root / "a" / "album.jpg" / "inside.png").write_bytes(photo_bytes("PNG"))
    dataset = ImageFolderDataset(root, labels="class_folders")
    assert dataset.classes == ["a", "b", "c"]
    names = [(path.name, label) for path, label in dataset.samples]
    assert names[:4] == [("inside.png", 0), ("good0.png", 0), ("good1.png", 0), ("good2.png", 0)]
    assert len(names) == 10


def test_a_message_that_is_not_a_workers_copy_is_left_alone() -> None:
    assert worker_message(DataError("cannot read image x.jpg: truncated")) is None
    copy = DataError(
        "Caught DataError in DataLoader worker process 3.\nOriginal Traceback (most recent "
        'call last):\n  File "x.py", line 1, in f\nhookbus.engine.errors.DataError: '
        "cannot read image x.jpg: truncated\n"
    )
    assert worker_message(copy) == "cannot read image x.jpg: truncated"


def test_hookbus_train_prints_the_one_line_with_loader_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = image_folder(tmp_path / "images", per_class=4)
    (root / "a" / "bad.jpg").write_bytes(truncated_jpeg())
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "data": folder_config(root, "crop_first", workers=1),
                "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
                "optimizer": {"num_epochs": 1, "warmup_epochs": 0},
                "meters": {"knn": {"enabled": False}},
                "hooks": {
                    "progress_bar": {"enabled": False},
                    "evaluation_report": {"enabled": False},
                    "tensorboard": {"enabled": False},
                },
            }
        )
    )
    assert main(["train", str(recipe), f"checkpoint.dir={tmp_path / 'run'}", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookbus train: error: cannot read image {root / 'a' / 'bad.jpg'}: ")
    assert len(err.splitlines()) == 1 and "worker" not in err, err


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_workers_are_stopped_when_their_error_is_raised(tmp_path: Path, pipeline: str) -> None:
    """Stopped then, not by the garbage collector later (which waits out torch's join
    timeout, 5 s a worker, before the run can end)."""
    root = image_folder(tmp_path / "images")
    (root / "b" / "bad.jpg").write_bytes(b"")
    cfg = validate_config({"data": folder_config(root, pipeline, workers=2)})
    batches = iter(build_data_loaders(cfg)["test"])
    workers = batches._workers
    assert len(workers) == 2 and all(worker.is_alive() for worker in workers)
    with pytest.raises(DataError, match="cannot read image"):
        list(batches)
    assert [worker.is_alive() for worker in workers] == [False, False]

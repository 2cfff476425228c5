"""The bad-input rows of the training image folder (``data.folder.train_dir``): each class
of ../shared/BAD_INPUTS.md planted among real photographs, then ``hookbus train``. Every
one is one line on standard error naming the file or folder, exit status 2, and nothing
trained; a folder named like an image is walked into, not refused.

The rows of the other classes on this surface (permissions, an image removed during the
run, a class folder without images) are in tests/runner/test_loader_worker_errors.py;
tests/integration/test_bad_input_surfaces.py points at both.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from hookbus.cli import main
from tests.photos import photograph
from tests.tiny_data import tiny_folder_run

ROOT = Path(__file__).resolve().parents[2]


def jpeg_bytes(name: str = "china", size: tuple[int, int] = (40, 30)) -> bytes:
    encoded = io.BytesIO()
    photograph(name).resize(size).save(encoded, "JPEG", quality=90)
    return encoded.getvalue()


def garbled_jpeg() -> bytes:
    """flower.jpg with noise over 2,000 bytes of its compressed data: libjpeg-turbo prints
    "Corrupt JPEG data: premature end of data segment", then both decoders fail."""
    data = bytearray(jpeg_bytes("flower", (427, 640)))
    middle = len(data) // 2
    data[middle : middle + 2000] = np.random.default_rng(0).bytes(2000)
    return bytes(data)


def jpeg_claiming(width: int, height: int) -> bytes:
    """A real photo's JPEG whose frame header claims ``width`` x ``height`` pixels."""
    data = bytearray(jpeg_bytes())
    frame = data.index(b"\xff\xc0") + 5
    data[frame : frame + 4] = struct.pack(">HH", height, width)
    return bytes(data)


def png_claiming(width: int, height: int) -> bytes:
    """A real photo's PNG whose header claims ``width`` x ``height`` pixels (its checksum
    made right, so only the size is wrong)."""
    encoded = io.BytesIO()
    photograph("china").resize((40, 30)).save(encoded, "PNG")
    data = bytearray(encoded.getvalue())
    header = data.index(b"IHDR")
    data[header + 4 : header + 12] = struct.pack(">II", width, height)
    checksum = zlib.crc32(bytes(data[header : header + 17]))
    data[header + 17 : header + 21] = struct.pack(">I", checksum)
    return bytes(data)


def sparse_jpeg(path: Path) -> None:
    with open(path, "wb") as file:
        file.write(jpeg_bytes())
        file.truncate(8 << 30)


@dataclass(frozen=True)
class Case:
    """A bad input planted in ``root`` (a flat folder of four real photos), or a root
    that is itself the bad input; ``names`` must be in the error line."""

    name: str
    plant: Callable[[Path], object]
    names: str


CASES = [
    Case("missing folder", lambda root: os.rename(root, root.with_name("gone")), "not found"),
    Case(
        "empty folder",
        lambda root: [path.unlink() for path in root.iterdir()],
        "no images in",
    ),
    Case(
        "a file for the folder",
        lambda root: [os.rename(root, root.with_name("x")), root.write_bytes(b"")],
        "is not a folder",
    ),
    Case("empty image", lambda root: (root / "empty.jpg").write_bytes(b""), "empty.jpg"),
    Case(
        "truncated JPEG",
        lambda root: (root / "cut.jpg").write_bytes(jpeg_bytes()[:400]),
        "cut.jpg: Truncated File Read",
    ),
    Case(
        "garbled JPEG",
        lambda root: (root / "noise.jpg").write_bytes(garbled_jpeg()),
        "noise.jpg: broken data stream when reading image file",
    ),
    Case(
        "text named .png",
        lambda root: (root / "notes.png").write_text("not a photo\n"),
        "notes.png: not an image file Pillow can identify",
    ),
    Case(
        "JPEG claiming 65000 x 65000 pixels",
        lambda root: (root / "bomb.jpg").write_bytes(jpeg_claiming(65000, 65000)),
        "bomb.jpg: it claims 65000 x 65000 pixels, over the limit of",
    ),
    Case(
        "PNG claiming 100000 x 100000 pixels",
        lambda root: (root / "bomb.png").write_bytes(png_claiming(100000, 100000)),
        "bomb.png: Image size (10000000000 pixels) exceeds limit",
    ),
    Case(
        "sparse 8 GiB JPEG",
        lambda root: sparse_jpeg(root / "huge.jpg"),
        "huge.jpg is 8.0 GiB, over hookbus's limit",
    ),
    Case("FIFO named .jpg", lambda root: os.mkfifo(root / "pipe.jpg"), "pipe.jpg is a FIFO"),
    Case(
        "link to /dev/zero",
        lambda root: (root / "zero.jpg").symlink_to("/dev/zero"),
        "zero.jpg is a character device",
    ),
    Case(
        "symbolic link loop",
        lambda root: (root / "trip").symlink_to(root),
        "trip is a symbolic link loop",
    ),
    Case(
        "broken link",
        lambda root: (root / "gone.jpg").symlink_to(root / "nowhere.jpg"),
        "gone.jpg is a broken symbolic link",
    ),
]


def photo_folder(root: Path) -> Path:
    """Four crops of the two photographs, JPEG."""
    root.mkdir()
    for index, name in enumerate(("china", "flower") * 2):
        photo = photograph(name).crop((index * 40, 0, index * 40 + 200, 150))
        photo.resize((40, 30)).save(root / f"{index}.jpg", quality=90)
    return root


def recipe(tmp_path: Path, root: Path, pipeline: str = "crop_first") -> Path:
    path = tmp_path / "recipe.yaml"
    data = {
        "name": "image_folder",
        "pipeline": pipeline,
        "image_size": 16,
        "batch_size": 2,
        "test_batch_size": 8,
        "num_workers": 0,
        "folder": {"train_dir": str(root)},
    }
    settings = tiny_folder_run(data)
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["crop_first", "torchvision"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_bad_input_in_the_image_folder_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case, pipeline: str
) -> None:
    root = photo_folder(tmp_path / "photos")
    case.plant(root)
    run = tmp_path / "run"
    status = main(["train", str(recipe(tmp_path, root, pipeline)), f"checkpoint.dir={run}", "-q"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("hookbus train: error: ") and case.names in err, err
    assert not list(run.glob("*.torch")) if run.exists() else True


def test_a_folder_named_like_an_image_is_walked_into(tmp_path: Path) -> None:
    from hookbus.parts.data.image_folder import ImageFolderDataset

    root = photo_folder(tmp_path / "photos")
    (root / "album.jpg").mkdir()
    (root / "album.jpg" / "inside.jpg").write_bytes(jpeg_bytes("flower"))
    assert [path.name for path, _ in ImageFolderDataset(root, labels="none").samples] == [
        "0.jpg",
        "1.jpg",
        "2.jpg",
        "3.jpg",
        "inside.jpg",
    ]


@pytest.mark.slow
def test_a_corrupt_jpeg_prints_exactly_one_line_in_a_real_process(tmp_path: Path) -> None:
    """The terminal as a user sees it: ``hookbus train`` in its own process, at full size
    (libjpeg-turbo's decoder, which prints its warning with C's stdio)."""
    root = photo_folder(tmp_path / "photos")
    (root / "noise.jpg").write_bytes(garbled_jpeg())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hookbus",
            "train",
            str(recipe(tmp_path, root, "torchvision")),
            f"checkpoint.dir={tmp_path / 'run'}",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"hookbus train: error: cannot read image {root / 'noise.jpg'}: broken data stream "
        "when reading image file (Corrupt JPEG data: premature end of data segment)\n"
    )

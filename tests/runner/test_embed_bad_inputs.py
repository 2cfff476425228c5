"""``hookbus embed`` on hostile inputs: it never writes over its own inputs, never says it
wrote what a full disk refused, and never returns fewer rows than images without a word
(an image it cannot use is refused in one line, or skipped and listed when asked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from hookbus import embed_images
from hookbus.cli import main
from hookbus.embed_data import SKIP_HINT, find_images
from hookbus.engine.errors import DataError
from hookbus.parts.models import build_model
from tests.disk_mounts import fill, small_tmpfs
from tests.photos import make_photo_folder
from tests.runner.test_embed import photo_config, write_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on 32 px images: a seeded small CNN's checkpoint."""
    run_dir = tmp_path_factory.mktemp("runs") / "run"
    cfg = photo_config(run_dir)
    torch.manual_seed(0)
    return write_run(run_dir, cfg, build_model(cfg))


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    """12 real photographs (crops of scikit-learn's two sample images), 32 px."""
    return make_photo_folder(tmp_path / "photos", per_class=3, size=32)


def embed(*arguments: str | Path) -> int:
    return main(["embed", *map(str, arguments), "-q", "--num-workers", "0"])


def loaded(out: Path) -> dict[str, object]:
    return torch.load(out, weights_only=True)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("hookbus embed: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# Writing over its own inputs ---------------------------------------------------------


def into_the_folder(photos: Path, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    image = photos / "test" / "china" / "000.jpg"
    arguments = [str(photos), "--out", str(image), "--format", "pt", "--overwrite"]
    return image, arguments, image, f"is inside the image folder {photos}, an input"


def onto_the_image_itself(photos: Path, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    image = photos / "test" / "china" / "001.jpg"
    arguments = [str(image), "--out", str(image), "--format", "npz", "--overwrite"]
    return image, arguments, image, f"is the input image {image}"


def a_new_file_in_the_folder(photos: Path, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    out = photos / "train" / "emb.pt"
    return out, [str(photos), "--out", str(out)], photos / "train", "is inside the image folder"


def a_symbolic_link_to_an_image(photos: Path, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    image = photos / "test" / "flower" / "000.jpg"
    link = tmp_path / "emb.pt"
    link.symlink_to(image)
    return link, [str(photos), "--out", str(link), "--overwrite"], image, "inside the image folder"


def a_hard_link_to_an_image(photos: Path, tmp_path: Path) -> tuple[Path, list[str], Path, str]:
    image = photos / "train" / "flower" / "002.jpg"
    link = tmp_path / "emb.csv"
    os.link(image, link)
    arguments = [str(photos), "--out", str(link), "--overwrite"]
    return link, arguments, image, f"is the input image {image} (a hard link to it)"


def a_dotdot_path_into_the_folder(
    photos: Path, tmp_path: Path
) -> tuple[Path, list[str], Path, str]:
    (tmp_path / "side").mkdir()
    out = tmp_path / "side" / ".." / "photos" / "test" / "emb.pt"
    return out, [str(photos), "--out", str(out)], photos / "test", "is inside the image folder"


OVER_INPUTS = {
    "an input image inside the folder": into_the_folder,
    "the input image named as a file": onto_the_image_itself,
    "a new file inside an input folder": a_new_file_in_the_folder,
    "a symbolic link to an input image": a_symbolic_link_to_an_image,
    "a hard link to an input image": a_hard_link_to_an_image,
    "a .. path into the input folder": a_dotdot_path_into_the_folder,
}
"""Outputs that are, or lie inside, an input: each makes ``(out, embed's arguments after
the run, the input it must leave as it was, the words of the refusal)``."""


def contents(path: Path) -> dict[str, bytes]:
    """The bytes of the file ``path``, or of every file under the folder ``path``."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(file): file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file()}


@pytest.mark.parametrize("case", list(OVER_INPUTS))
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
    case: str, run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, arguments, kept, said = OVER_INPUTS[case](photos, tmp_path)
    before, was_link = contents(kept), out.is_symlink()
    assert embed(run, *arguments) == 2
    assert said in one_error_line(capsys)
    assert contents(kept) == before and out.is_symlink() == was_link


# Images it cannot use: refused in one line, or skipped and listed ----------------------


def plant_broken_link(photos: Path) -> Path:
    link = photos / "test" / "gone.jpg"
    link.symlink_to(photos / "nowhere.jpg")
    return link


def plant_fifo(photos: Path) -> Path:
    fifo = photos / "train" / "pipe.jpg"
    os.mkfifo(fifo)
    return fifo


def plant_loop(photos: Path) -> Path:
    loop = photos / "train" / "china" / "again"
    loop.symlink_to(photos / "train")
    return loop


def plant_corrupt(photos: Path) -> Path:
    truncated = photos / "test" / "flower" / "003.jpg"
    truncated.write_bytes((photos / "test" / "flower" / "000.jpg").read_bytes()[:200])
    return truncated


def plant_strip(photos: Path) -> Path:
    strip = photos / "train" / "strip.png"
    Image.new("RGB", (60000, 1), (200, 100, 50)).save(strip)
    return strip


def plant_empty(photos: Path) -> Path:
    empty = photos / "test" / "empty.jpg"
    empty.write_bytes(b"")
    return empty


def plant_dev_zero(photos: Path) -> Path:
    link = photos / "test" / "zero.jpg"
    link.symlink_to("/dev/zero")
    return link


def plant_sparse(photos: Path) -> Path:
    sparse = photos / "test" / "huge.jpg"
    with sparse.open("wb") as file:
        file.truncate(8 << 30)
    return sparse


PLANTED = {
    "a broken link": (plant_broken_link, "is a broken symbolic link"),
    "a FIFO named .jpg": (plant_fifo, "is a FIFO (named pipe), not a regular file"),
    "a symbolic link loop": (plant_loop, "is a symbolic link loop"),
    "a truncated JPEG": (plant_corrupt, "cannot read image"),
    "a 60000 x 1 strip": (plant_strip, "over the 67108864 embed takes"),
    "an empty .jpg": (plant_empty, "cannot read image"),
    "a link to /dev/zero named .jpg": (plant_dev_zero, "not a regular file"),
    "an 8 GiB sparse .jpg": (plant_sparse, "MiB"),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_an_image_it_cannot_use_is_refused_in_one_line_naming_it(
    case: str, run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant, message = PLANTED[case]
    planted = plant(photos)
    out = tmp_path / "emb.pt"
    assert embed(run, photos, "--out", out) == 2
    error = one_error_line(capsys)
    assert str(planted) in error and message in error and "--skip-unreadable" in error
    assert not out.exists()


@pytest.mark.parametrize("case", list(PLANTED))
def test_skip_unreadable_leaves_it_out_says_so_and_keeps_the_other_rows(
    case: str, run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = tmp_path / "clean.pt"
    assert embed(run, photos, "--out", clean) == 0
    capsys.readouterr()
    plant, message = PLANTED[case]
    planted = plant(photos)
    out = tmp_path / "emb.pt"
    assert embed(run, photos, "--out", out, "--skip-unreadable") == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == (
        "hookbus embed: skipped 1 of 13 images that could not be used (--skip-unreadable):"
    )
    assert str(planted) in captured.err.splitlines()[1] and message in captured.err
    assert ", 1 skipped (listed on stderr)" in captured.out
    expected, written = loaded(clean), loaded(out)
    assert written["paths"] == expected["paths"]
    assert torch.equal(written["embeddings"], expected["embeddings"])  # type: ignore[arg-type]


def test_skipped_images_are_listed_by_the_python_api(run: Path, photos: Path) -> None:
    fifo, link = plant_fifo(photos), plant_broken_link(photos)
    result = embed_images(run, photos, num_workers=0, skip_unreadable=True)
    assert [entry.path for entry in result.skipped] == [str(link), str(fifo)]
    assert len(result.paths) == 12 == len(result.embeddings)


def test_a_symlinked_subfolder_is_embedded(run: Path, photos: Path, tmp_path: Path) -> None:
    elsewhere = make_photo_folder(tmp_path / "elsewhere", per_class=1, size=32)
    (photos / "more").symlink_to(elsewhere / "test")
    result = embed_images(run, photos, num_workers=0)
    assert len(result.paths) == 14 and str(photos / "more" / "china" / "000.jpg") in result.paths


def test_a_folder_of_nothing_but_unusable_images_is_refused_even_when_skipping(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "a.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    assert embed(run, tmp_path / "bad", "--out", tmp_path / "e.pt", "--skip-unreadable") == 2
    assert "no image could be read: all 1 skipped" in one_error_line(capsys)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_corrupt_image_with_workers_is_the_same_line(
    workers: int, run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = plant_corrupt(photos)
    arguments = ["embed", str(run), str(photos), "--out", str(tmp_path / "e.pt"), "-q"]
    assert main([*arguments, "--num-workers", str(workers)]) == 2
    assert f"cannot read image {truncated}" in one_error_line(capsys)


# Extreme sizes and worker counts ------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--image-size", "100000", "image size must be 1 to 4096 pixels, not 100000"),
        ("--image-size", "0", "image size must be 1 to 4096 pixels, not 0"),
        ("--num-workers", "100000", "num_workers must be 0 to 256, not 100000"),
        ("--num-workers", "-1", "num_workers must be 0 to 256, not -1"),
        ("--batch-size", "0", "batch size must be at least 1, not 0"),
        ("--batch-size", "100000000", "GiB, over half of this machine's"),
    ],
)
def test_extreme_sizes_and_worker_counts_are_one_line_before_any_work(
    option: str,
    value: str,
    message: str,
    run: Path,
    photos: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "e.pt"
    assert main(["embed", str(run), str(photos), "--out", str(out), option, value, "-q"]) == 2
    assert message in one_error_line(capsys)
    assert not out.exists()


# Writes that fail ---------------------------------------------------------------------


def test_a_full_disk_is_one_line_exit_1_and_a_rerun_equals_a_clean_run(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a real 64 KiB tmpfs, filled to the last byte."""
    clean = tmp_path / "clean.csv"
    assert embed(run, photos, "--out", clean) == 0
    capsys.readouterr()
    with small_tmpfs(tmp_path / "small") as small:
        filler = fill(small)
        out = small / "emb.csv"
        assert embed(run, photos, "--out", out) == 1
        captured = capsys.readouterr()
        assert captured.err == (
            f"hookbus embed: error: cannot write {out}: No space left on device; it is left "
            "as it was\n"
        )
        assert captured.out == "" and sorted(os.listdir(small)) == ["filler"]
        filler.unlink()
        assert embed(run, photos, "--out", out) == 0
        assert out.read_bytes() == clean.read_bytes()


def test_a_read_only_folder_is_one_line_exit_1(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "ro", read_only=True) as folder:
        assert embed(run, photos, "--out", folder / "emb.npz") == 1
        assert "Read-only file system" in one_error_line(capsys)
        assert os.listdir(folder) == []


# More classes of the bad-input table: a folder where a file belongs, an unreadable
# folder, an image removed during the run, a kill ----------------------------------------


def test_a_folder_named_like_an_image_given_as_one_is_refused(
    run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    album = photos / "album.jpg"
    album.mkdir()
    assert embed(run, album, "--out", tmp_path / "emb.pt") == 2
    assert f"no images in {album}" in one_error_line(capsys)


def test_an_image_removed_after_the_walk_is_named(run: Path, photos: Path) -> None:
    found = find_images([photos])
    gone = found.files[3]
    gone.unlink()
    with pytest.raises(DataError, match=f"image not found: {gone}|{gone}"):
        embed_images(run, found, num_workers=0)
    result = embed_images(run, found, num_workers=0, skip_unreadable=True)
    assert [entry.path for entry in result.skipped] == [str(gone)]
    assert len(result.paths) == 11


WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
"""As root: without the capabilities to read any file and enter any folder."""


@pytest.mark.slow
def test_a_folder_that_cannot_be_listed_is_one_line_or_skipped(
    run: Path, photos: Path, tmp_path: Path
) -> None:
    """In a ``hookbus embed`` process for which permissions hold (root's override
    dropped with setpriv): a real mode 000 folder."""
    locked = photos / "train" / "china"
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    command = [*prefix, sys.executable, "-m", "hookbus", "embed", str(run), str(photos), "-q"]
    command += ["--num-workers", "0"]

    def embedded(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *map(str, arguments)], capture_output=True, text=True)

    locked.chmod(0)
    try:
        refused = embedded("--out", tmp_path / "a.pt")
        skipped = embedded("--skip-unreadable", "--out", tmp_path / "b.pt")
    finally:
        locked.chmod(0o755)
    assert refused.returncode == 2 and refused.stderr == (
        f"hookbus embed: error: cannot list image folder {locked}: Permission denied: {SKIP_HINT}\n"
    )
    assert skipped.returncode == 0, skipped.stderr
    assert (
        skipped.stderr.splitlines()[1] == f"  cannot list image folder {locked}: Permission denied"
    )
    assert len(loaded(tmp_path / "b.pt")["paths"]) == 9  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_kill_during_embedding_leaves_no_output_and_a_rerun_equals_a_clean_run(
    run: Path, tmp_path: Path
) -> None:
    photos = make_photo_folder(tmp_path / "many", per_class=60, size=64)
    out, clean = tmp_path / "emb.npz", tmp_path / "clean.npz"
    assert embed(run, photos, "--out", clean) == 0
    command = [sys.executable, "-m", "hookbus", "embed", str(run), str(photos), "--out", str(out)]
    process = subprocess.Popen(
        [*command, "--num-workers", "0", "--batch-size", "4"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    while "embed:" not in process.stderr.read(64):  # the progress bar: images are read
        assert process.poll() is None
    process.kill()
    process.wait(timeout=60)
    assert not out.exists()
    assert [name for name in os.listdir(tmp_path) if name.startswith(".emb")] == []
    assert embed(run, photos, "--out", out) == 0
    assert out.read_bytes() == clean.read_bytes()


# The source embed and export read, and an output that is a link loop -------------------


def empty_source(folder: Path) -> Path:
    (folder / "empty.pth").write_bytes(b"")
    return folder / "empty.pth"


def sparse_source(folder: Path) -> Path:
    with (folder / "huge.pth").open("wb") as file:
        file.truncate(8 << 30)
    return folder / "huge.pth"


def loop_source(folder: Path) -> Path:
    (folder / "loop.pth").symlink_to(folder / "loop.pth")
    return folder / "loop.pth"


SOURCES = {
    "an empty file": (empty_source, "the file is empty"),
    "an 8 GiB sparse file": (sparse_source, "not a file torch.save wrote"),
    "a symbolic link loop": (loop_source, "is a symbolic link loop: it leads nowhere"),
}


@pytest.mark.parametrize("case", list(SOURCES))
def test_a_source_embed_cannot_load_is_one_line_naming_it(
    case: str, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, message = SOURCES[case]
    source = make(tmp_path)
    assert embed(source, photos, "--out", tmp_path / "emb.pt") == 2
    error = one_error_line(capsys)
    assert str(source) in error and message in error


def test_a_source_export_meets_as_a_link_loop_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = loop_source(tmp_path)
    assert main(["export", str(source), str(tmp_path / "backbone.pth")]) == 2
    assert capsys.readouterr().err == (
        f"hookbus export: error: {source} is a symbolic link loop: it leads nowhere\n"
    )


@pytest.mark.parametrize("command", ["embed", "export"])
def test_an_output_that_is_a_link_loop_is_one_line(
    command: str, run: Path, photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "emb.pt"
    out.symlink_to(tmp_path / "other.pt")
    (tmp_path / "other.pt").symlink_to(out)
    inputs = [str(run), str(photos)] if command == "embed" else [str(run)]
    arguments = [command, *inputs, *(["--out"] if command == "embed" else []), str(out)]
    assert main(arguments) == 2
    assert capsys.readouterr().err == (
        f"hookbus {command}: error: {out} is a symbolic link loop: it leads nowhere\n"
    )

"""The kernel's folder walk: every class of entry a user's folder may hold, one test each."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from hookbus.engine.errors import DataError, UserError
from hookbus.engine.folder_walk import FolderWalk, walk_folder

IMAGES = (".jpg", ".png")


def touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def names(walk: FolderWalk) -> list[str]:
    return [str(path.relative_to(walk.root)) for path in walk.files]


def kinds(walk: FolderWalk) -> list[tuple[str, str]]:
    return [(str(problem.path.relative_to(walk.root)), problem.kind) for problem in walk.problems]


def test_files_come_sorted_by_their_path_recursively_filtered_by_suffix(tmp_path: Path) -> None:
    for name in ("b.jpg", "a/z.PNG", "a/b/c.jpg", "a/b.jpg", "notes.txt", "c/d/e/f.jpg"):
        touch(tmp_path / name)
    walk = walk_folder(tmp_path, suffixes=IMAGES)
    assert names(walk) == ["a/b/c.jpg", "a/b.jpg", "a/z.PNG", "b.jpg", "c/d/e/f.jpg"]
    assert [str(p.relative_to(tmp_path)) for p in walk.folders] == [
        ".",
        "a",
        "a/b",
        "c",
        "c/d",
        "c/d/e",
    ]
    assert walk.problems == () and walk.hidden == 0
    assert names(walk_folder(tmp_path))[-1] == "notes.txt"


def test_hidden_entries_are_counted_and_never_read(tmp_path: Path) -> None:
    touch(tmp_path / "a.jpg")
    touch(tmp_path / "._a.jpg")
    touch(tmp_path / ".thumbnails" / "t.jpg")
    os.mkfifo(tmp_path / ".pipe.jpg")
    walk = walk_folder(tmp_path, suffixes=IMAGES)
    assert names(walk) == ["a.jpg"]
    assert walk.hidden == 3 and walk.problems == ()


def test_symlinked_folders_and_files_are_followed(tmp_path: Path) -> None:
    touch(tmp_path / "elsewhere" / "x.jpg")
    touch(tmp_path / "elsewhere" / "deeper" / "y.jpg")
    touch(tmp_path / "photo.jpg")
    root = tmp_path / "root"
    root.mkdir()
    (root / "trip").symlink_to(tmp_path / "elsewhere")
    (root / "best.jpg").symlink_to(tmp_path / "photo.jpg")
    walk = walk_folder(root, suffixes=IMAGES)
    assert names(walk) == ["best.jpg", "trip/deeper/y.jpg", "trip/x.jpg"]
    assert walk.problems == ()


def test_a_link_back_to_a_folder_above_is_a_loop_and_the_walk_ends(tmp_path: Path) -> None:
    touch(tmp_path / "a" / "b" / "x.jpg")
    (tmp_path / "a" / "b" / "up").symlink_to(tmp_path / "a")
    (tmp_path / "a" / "self").symlink_to(".")
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["a/b/x.jpg"]
    assert kinds(walk) == [("a/self", "symlink loop"), ("a/b/up", "symlink loop")]
    assert walk.problems[1].message == (
        f"image folder {tmp_path}/a/b/up is a symbolic link loop: it leads back to "
        f"{tmp_path}/a, a folder above it"
    )


def test_a_link_that_leads_to_itself_is_a_loop_not_a_traceback(tmp_path: Path) -> None:
    touch(tmp_path / "x.jpg")
    (tmp_path / "round.jpg").symlink_to("round.jpg")
    (tmp_path / "ping").symlink_to("pong")
    (tmp_path / "pong").symlink_to("ping")
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["x.jpg"]
    assert kinds(walk) == [
        ("ping", "symlink loop"),
        ("pong", "symlink loop"),
        ("round.jpg", "symlink loop"),
    ]
    with pytest.raises(DataError) as raised:
        walk.refuse_problems(DataError)
    assert str(raised.value) == (
        f"{tmp_path}/ping is a symbolic link loop: it leads nowhere "
        f"(and 2 more problems under {tmp_path})"
    )


def test_a_folder_reached_twice_is_walked_once_under_its_own_path(tmp_path: Path) -> None:
    touch(tmp_path / "2019" / "best" / "x.jpg")
    touch(tmp_path / "2019" / "y.jpg")
    (tmp_path / "2019" / "again").symlink_to(tmp_path / "2019" / "best")
    (tmp_path / "aaa").symlink_to(tmp_path / "2019" / "best")
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["2019/best/x.jpg", "2019/y.jpg"]
    assert kinds(walk) == [("aaa", "folder reached twice"), ("2019/again", "folder reached twice")]
    assert walk.problems[0].message == (
        f"image folders {tmp_path}/2019/best and {tmp_path}/aaa are one folder (through a "
        f"symbolic link): its files are read once, under {tmp_path}/2019/best"
    )


def test_broken_links_are_reported_whatever_their_name(tmp_path: Path) -> None:
    touch(tmp_path / "x.jpg")
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    (tmp_path / "usb-drive").symlink_to("/mnt/not-mounted/2019")
    walk = walk_folder(tmp_path, suffixes=IMAGES)
    assert names(walk) == ["x.jpg"]
    assert kinds(walk) == [("gone.jpg", "broken link"), ("usb-drive", "broken link")]
    assert walk.problems[1].message == (
        f"{tmp_path}/usb-drive is a broken symbolic link (to /mnt/not-mounted/2019)"
    )


def test_fifos_and_devices_named_like_images_are_reported_others_ignored(
    tmp_path: Path,
) -> None:
    touch(tmp_path / "x.jpg")
    os.mkfifo(tmp_path / "pipe.jpg")
    os.mkfifo(tmp_path / "pipe.txt")
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["x.jpg"]
    assert kinds(walk) == [("pipe.jpg", "not a regular file"), ("zero.png", "not a regular file")]
    assert [problem.message for problem in walk.problems] == [
        f"image {tmp_path}/pipe.jpg is a FIFO (named pipe), not a regular file: hookbus "
        "reads only regular files",
        f"image {tmp_path}/zero.png is a character device, not a regular file: hookbus "
        "reads only regular files",
    ]


@pytest.fixture
def ghosts(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path, str], None]:
    """``ghosts(folder, name)``: listing ``folder`` names ``name`` too, an entry that is
    gone by the time the walk looks at it (a file deleted during the walk)."""
    extra: dict[str, list[str]] = {}
    real_scandir = os.scandir

    class Listing:
        def __init__(self, path: str) -> None:
            self.entries = list(real_scandir(path))
            self.entries += [SimpleNamespace(name=name) for name in extra.get(path, [])]

        def __enter__(self) -> Iterator[object]:
            return iter(self.entries)

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(os, "scandir", lambda path: Listing(os.fspath(path)))
    return lambda folder, name: extra.setdefault(os.fspath(folder), []).append(name)


def test_entries_that_vanish_during_the_walk_are_reported(
    tmp_path: Path, ghosts: Callable[[Path, str], None]
) -> None:
    touch(tmp_path / "a" / "x.jpg")
    ghosts(tmp_path / "a", "deleted.jpg")
    ghosts(tmp_path, "deleted-folder")
    walk = walk_folder(tmp_path, suffixes=IMAGES)
    assert names(walk) == ["a/x.jpg"]
    assert kinds(walk) == [("deleted-folder", "vanished"), ("a/deleted.jpg", "vanished")]
    assert (
        walk.problems[1].message == f"{tmp_path}/a/deleted.jpg vanished while its folder was read"
    )


def test_a_folder_that_vanishes_before_it_is_listed_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path / "a" / "x.jpg")
    touch(tmp_path / "b" / "y.jpg")
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        if isinstance(path, Path) and path == tmp_path / "a":
            (path / "x.jpg").unlink()
            path.rmdir()
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["b/y.jpg"]
    assert kinds(walk) == [("a", "vanished")]
    assert walk.problems[0].message == f"image folder {tmp_path}/a vanished while read"


def test_folders_and_files_without_permission_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a/x.jpg", "b/y.jpg", "c/z.jpg", "c/secret.jpg"):
        touch(tmp_path / name)
    real_scandir, real_access = os.scandir, os.access
    locked, secret = str(tmp_path / "b"), str(tmp_path / "c" / "secret.jpg")

    def scandir(path: str) -> object:
        if os.fspath(path) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", locked)
        return real_scandir(path)

    def access(path: str, mode: int) -> bool:
        return os.fspath(path) != secret and real_access(path, mode)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "access", access)
    walk = walk_folder(tmp_path, suffixes=IMAGES, what="image")
    assert names(walk) == ["a/x.jpg", "c/z.jpg"]
    assert kinds(walk) == [("b", "unreadable folder"), ("c/secret.jpg", "unreadable file")]
    assert [problem.message for problem in walk.problems] == [
        f"cannot list image folder {tmp_path}/b: Permission denied",
        f"cannot read image {tmp_path}/c/secret.jpg: Permission denied",
    ]


@pytest.mark.parametrize("case", ["missing", "a file", "unlistable"])
def test_a_root_that_cannot_be_walked_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    root = tmp_path / "root"
    if case == "a file":
        touch(root)
    elif case == "unlistable":
        root.mkdir()

        def scandir(path: str) -> object:
            raise PermissionError(13, "Permission denied", path)

        monkeypatch.setattr(os, "scandir", scandir)
    expected = {
        "missing": f"image folder not found: {root}",
        "a file": f"image folder {root} is not a folder",
        "unlistable": f"cannot list image folder {root}: Permission denied",
    }[case]
    with pytest.raises(DataError) as raised:
        walk_folder(root, what="image", error=DataError)
    assert str(raised.value) == expected


def test_any_depth_is_walked_without_recursion(tmp_path: Path) -> None:
    levels = [tmp_path.joinpath(*["d"] * depth) for depth in range(1, 1201)]
    for level in levels:  # one at a time: pathlib's mkdir(parents=True) would recurse
        level.mkdir()
    (levels[-1] / "x.jpg").write_bytes(b"x")
    try:
        walk = walk_folder(tmp_path, suffixes=IMAGES)
        assert walk.files == (levels[-1] / "x.jpg",)
        assert len(walk.folders) == 1201
    finally:
        (levels[-1] / "x.jpg").unlink()
        for level in reversed(levels):  # shutil.rmtree would recurse too
            level.rmdir()


def test_refusing_nothing_raises_nothing(tmp_path: Path) -> None:
    touch(tmp_path / "x.jpg")
    walk = walk_folder(tmp_path)
    walk.refuse_problems(UserError)
    assert names(walk) == ["x.jpg"]

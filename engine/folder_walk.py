"""Walking a folder a user named: every file under it, in a fixed order, and a list of
what could not be used, never a traceback.

A user's folder (a photo dump, a class tree, an embed input) may hold anything: folders
reached through symbolic links (some of them leading back to a folder above: a loop),
folders that cannot be listed, broken links, FIFOs and devices named like images, entries
that vanish between the listing and the look. :func:`walk_folder` walks it once and
returns a :class:`FolderWalk`:

- ``files``: the regular files under the root whose names end with one of ``suffixes``
  (any case; every file when ``suffixes`` is None), recursively, sorted by their path
  below the root (folder by folder, each folder's entries by name), symbolic links to
  files and folders followed;
- ``folders``: the folders walked, in the same order;
- ``problems``: a :class:`WalkProblem` for each entry that could not be used, each with
  its :data:`ProblemKind` and a one-line message naming it;
- ``hidden``: how many entries were left out because their names start with a dot
  (``.DS_Store``, macOS's ``._IMG_0001.jpg`` companions, ``.thumbnails``): they are never
  walked nor read.

The caller decides: :meth:`FolderWalk.refuse_problems` raises one line naming the first
problem (and how many more there are), or the caller reports them and goes on with
``files``. A folder met a second time through a link is walked once: a link back to a
folder above it is a ``symlink loop``; two paths to one folder otherwise are ``folder
reached twice``, and its files are listed under the first path (the walk goes through
the folders it reaches without a link first, then through the linked ones in the order
it met them, so a folder's own path wins over any link to it). The walk keeps a stack,
not the call stack, so no depth of folders can exhaust Python's recursion limit.

Example::

    walk = walk_folder(Path("photos"), suffixes=(".jpg", ".png"), what="image")
    walk.refuse_problems(DataError)  # or: log walk.problems and go on
    for path in walk.files: ...
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hookbus.engine.bounded_files import check_regular
from hookbus.engine.errors import UserError

Key = tuple[int, int]
"""A folder's identity: ``(st_dev, st_ino)``, the same through every link to it."""

ProblemKind = Literal[
    "symlink loop",
    "folder reached twice",
    "unreadable folder",
    "unreadable file",
    "broken link",
    "not a regular file",
    "vanished",
]
"""What was wrong with an entry the walk could not use:

- ``symlink loop``: a link to a folder above it, or a link whose chain never ends;
- ``folder reached twice``: a link to a folder met already by another path;
- ``unreadable folder``: a folder that cannot be listed (permissions, an I/O error);
- ``unreadable file``: a file the process may not read, or cannot look at;
- ``broken link``: a symbolic link to nothing (reported whatever its name: it may
  have led to a folder);
- ``not a regular file``: a FIFO, device or socket whose name passes the filter;
- ``vanished``: listed, then gone before the walk looked at it.
"""


@dataclass(frozen=True)
class WalkProblem:
    """One entry the walk could not use: its path, its kind and a line for people."""

    path: Path
    kind: ProblemKind
    message: str


@dataclass(frozen=True)
class FolderWalk:
    """What :func:`walk_folder` found under ``root`` (see the module's docstring)."""

    root: Path
    files: tuple[Path, ...]
    folders: tuple[Path, ...]
    problems: tuple[WalkProblem, ...]
    hidden: int

    def refuse_problems(self, error: type[Exception] = UserError) -> None:
        """Raise ``error`` with the first problem's message (and the count of the others)
        when there is any problem; else nothing."""
        if not self.problems:
            return
        more = len(self.problems) - 1
        extra = f" (and {more} more problem{'s' * (more > 1)} under {self.root})" if more else ""
        raise error(self.problems[0].message + extra)


class _NotRegular(Exception):
    """The message :func:`check_regular` gives a path that is not a regular file."""


class _Walk:
    """The state of one walk: what was found so far."""

    def __init__(self, what: str, suffixes: tuple[str, ...] | None) -> None:
        self.what = what
        self.suffixes = suffixes
        self.files: list[Path] = []
        self.folders: list[Path] = []
        self.problems: list[WalkProblem] = []
        self.hidden = 0
        self.walked: dict[Key, Path] = {}

    def problem(self, path: Path, kind: ProblemKind, message: str) -> None:
        self.problems.append(WalkProblem(path, kind, message))

    def wanted(self, name: str) -> bool:
        return self.suffixes is None or name.lower().endswith(self.suffixes)

    def names(self, folder: Path) -> list[str] | None:
        """The sorted names in ``folder``, or None (a problem recorded) when it cannot be
        listed."""
        try:
            with os.scandir(folder) as entries:
                return sorted(entry.name for entry in entries)
        except FileNotFoundError:
            self.problem(folder, "vanished", f"{self.what} folder {folder} vanished while read")
        except OSError as exc:
            self.problem(
                folder,
                "unreadable folder",
                f"cannot list {self.what} folder {folder}: {exc.strerror or exc}",
            )
        return None

    def look(self, path: Path) -> os.stat_result | None:
        """``os.stat(path)``, links followed; None (a problem recorded) when that fails."""
        try:
            return os.stat(path)
        except OSError as exc:
            failure = exc
        if failure.errno == errno.ELOOP:
            self.problem(path, "symlink loop", f"{path} is a symbolic link loop: it leads nowhere")
            return None
        reason = failure.strerror or str(failure)
        try:
            target = os.readlink(path)
        except OSError:  # not a link (any more): the entry itself
            if isinstance(failure, FileNotFoundError):
                self.problem(path, "vanished", f"{path} vanished while its folder was read")
            else:
                self.problem(path, "unreadable file", f"cannot look at {path}: {reason}")
            return None
        if isinstance(failure, FileNotFoundError):
            self.problem(path, "broken link", f"{path} is a broken symbolic link (to {target})")
        else:
            self.problem(
                path,
                "unreadable file",
                f"cannot follow the symbolic link {path} (to {target}): {reason}",
            )
        return None

    def enter(self, folder: Path, status: os.stat_result, above: frozenset[Key]) -> Key | None:
        """The identity of ``folder`` when it is to be walked; None when it is a folder
        above it again (a loop) or one met already by another path (both recorded as
        problems)."""
        key = (status.st_dev, status.st_ino)
        if key in above:
            self.problem(
                folder,
                "symlink loop",
                f"{self.what} folder {folder} is a symbolic link loop: it leads back to "
                f"{self.walked[key]}, a folder above it",
            )
            return None
        if key in self.walked:
            self.problem(
                folder,
                "folder reached twice",
                f"{self.what} folders {self.walked[key]} and {folder} are one folder (through "
                f"a symbolic link): its files are read once, under {self.walked[key]}",
            )
            return None
        self.walked[key] = folder
        self.folders.append(folder)
        return key

    def file(self, path: Path, status: os.stat_result) -> None:
        """Take ``path`` (a wanted name) as a file, or record why not."""
        if not stat.S_ISREG(status.st_mode):
            try:
                check_regular(path, self.what, error=_NotRegular)
            except _NotRegular as exc:
                self.problem(path, "not a regular file", str(exc))
            else:  # replaced by a regular file since it was looked at
                self.files.append(path)
            return
        if not os.access(path, os.R_OK):
            self.problem(
                path, "unreadable file", f"cannot read {self.what} {path}: Permission denied"
            )
            return
        self.files.append(path)


def walk_folder(
    root: Path,
    *,
    suffixes: tuple[str, ...] | None = None,
    what: str = "file",
    error: type[Exception] = UserError,
) -> FolderWalk:
    """Walk ``root`` (see the module's docstring). ``what`` names the files in messages
    (``"image"``); ``suffixes`` are name endings (``".jpg"``, any case), None for every
    file. A root that is missing, not a folder or cannot be listed is ``error`` at once:
    there is nothing to walk."""
    root = Path(root)
    try:
        status = os.stat(root)
    except FileNotFoundError:
        raise error(f"{what} folder not found: {root}") from None
    except OSError as exc:
        raise error(f"cannot read {what} folder {root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(status.st_mode):
        raise error(f"{what} folder {root} is not a folder")
    walk = _Walk(what, None if suffixes is None else tuple(s.lower() for s in suffixes))
    key = walk.enter(root, status, frozenset())
    assert key is not None
    # Folders reached without a link are walked first, so that a link to one of them
    # (from anywhere) is the duplicate; then the linked folders, in the order met.
    stack: list[tuple[Path, frozenset[Key]]] = [(root, frozenset({key}))]
    linked: deque[tuple[Path, os.stat_result, frozenset[Key]]] = deque()
    while stack or linked:
        if not stack:
            path, status, inside = linked.popleft()
            key = walk.enter(path, status, inside)
            if key is not None:
                stack.append((path, inside | {key}))
            continue
        folder, inside = stack.pop()
        names = walk.names(folder)
        if names is None:
            if folder == root:
                raise error(walk.problems[-1].message)
            continue
        subfolders: list[tuple[Path, frozenset[Key]]] = []
        for name in names:
            if name.startswith("."):
                walk.hidden += 1
                continue
            path = folder / name
            looked = walk.look(path)
            if looked is None:
                continue
            if not stat.S_ISDIR(looked.st_mode):
                if walk.wanted(name):
                    walk.file(path, looked)
            elif path.is_symlink():
                linked.append((path, looked, inside))
            else:
                key = walk.enter(path, looked, inside)
                if key is not None:
                    subfolders.append((path, inside | {key}))
        stack += reversed(subfolders)
    return FolderWalk(
        root,
        tuple(sorted(walk.files, key=_below(root))),
        tuple(sorted(walk.folders, key=_below(root))),
        tuple(walk.problems),
        walk.hidden,
    )


def _below(root: Path) -> Callable[[Path], tuple[str, ...]]:
    """The sort key of paths under ``root``: their names below it, folder by folder."""
    return lambda path: path.relative_to(root).parts

"""Reading a file a user named, within bounds decided before anything is read.

A path may name a FIFO (opening it waits for a writer that never comes), a device
(``/dev/zero`` never ends), or a sparse file of terabytes that reads as zeros. Every
reader of a user's file in hookbus (recipes, checksum files, checkpoints, images, JSON
files of a run) goes through here:

- :func:`open_regular` opens without blocking (``O_NONBLOCK``: a FIFO's open returns at
  once), checks the opened descriptor with ``fstat`` (what is checked is what is read),
  and refuses anything but a regular file, or one over the size limit, naming the limit;
- :func:`read_bounded` and :func:`read_text_bounded` read such a file whole, never more
  than the limit even if it grows meanwhile;
- :func:`check_regular` is the same check by ``stat``, for a library that opens the path
  itself (``torch.load``, Pillow);
- :func:`loads_json_bounded` parses JSON text whose nesting is checked first.

Each takes ``what`` (``"config file"``, ``"image"``) to name the file in its one-line
error, and ``error``, the :class:`~hookbus.engine.errors.UserError` class to raise, so a
caller that skips bad files (a checkpoint among several) catches its own kind.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from hookbus.engine.errors import UserError

MAX_IMAGE_BYTES = 256 << 20
"""Largest image file read (256 MiB: Pillow's decompression-bomb bound of about 89
million pixels is some 270 MB of RGB, and a compressed file of that is far smaller)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of lists and objects in a JSON file hookbus reads (its own are 3)."""
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
"""A JSON string (skipped whole, brackets inside it do not count) or a bracket."""


def describe_size(size: int) -> str:
    """``size`` bytes for a person: ``512 bytes``, ``4.0 KiB``, ``8.0 GiB``."""
    if size < 1024:
        return f"{size} bytes"
    scaled = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "TiB":
            break
    return f"{scaled:.1f} {unit}"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check(
    path: Path, status: os.stat_result, what: str, limit: int | None, error: type[Exception]
) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise error(
            f"{what} {path} is {_kind(status.st_mode)}, not a regular file: hookbus reads "
            f"only regular files"
        )
    if limit is not None and status.st_size > limit:
        raise error(
            f"{what} {path} is {describe_size(status.st_size)}, over hookbus's limit of "
            f"{describe_size(limit)} for it"
        )


def _os_error(path: Path, what: str, exc: OSError, error: type[Exception]) -> Exception:
    if isinstance(exc, FileNotFoundError):
        return error(f"{what} not found: {path}")
    return error(f"cannot read {what} {path}: {exc.strerror or exc}")


def check_regular(
    path: Path, what: str, *, limit: int | None = None, error: type[Exception] = UserError
) -> os.stat_result:
    """``os.stat(path)`` (links followed) when it is a regular file within ``limit`` bytes;
    else ``error`` naming ``what``, the path and the limit. Opens nothing."""
    try:
        status = os.stat(path)
    except OSError as exc:
        raise _os_error(path, what, exc, error) from None
    _check(path, status, what, limit, error)
    return status


def open_regular(
    path: Path, what: str, *, limit: int | None = None, error: type[Exception] = UserError
) -> BinaryIO:
    """``path`` opened to read bytes (blocking as usual) once its descriptor is known to be
    a regular file within ``limit`` bytes; else ``error``. Never waits on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(path, what, exc, error) from None
    try:
        _check(path, os.fstat(fd), what, limit, error)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: Path, what: str, limit: int, *, error: type[Exception] = UserError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (see
    :func:`open_regular`); a file that grew past ``limit`` while read is refused too."""
    with open_regular(path, what, limit=limit, error=error) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise _os_error(path, what, exc, error) from None
    if len(data) > limit:
        raise error(f"{what} {path} grew past the limit of {describe_size(limit)} while read")
    return data


def read_text_bounded(
    path: Path, what: str, limit: int, *, error: type[Exception] = UserError
) -> str:
    """:func:`read_bounded` decoded as UTF-8; bytes that are not UTF-8 are ``error``."""
    try:
        return read_bounded(path, what, limit, error=error).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def json_depth(text: str) -> int:
    """The deepest nesting of lists and objects in the JSON ``text`` (0 for a scalar),
    counted without parsing it, so no depth can exhaust the parser's stack."""
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def loads_json_bounded(
    text: str, where: str, *, max_depth: int = MAX_JSON_DEPTH, error: type[Exception] = UserError
) -> Any:
    """``json.loads(text)`` once its nesting is known to be at most ``max_depth``; else
    ``error`` naming ``where`` and the limit. Invalid JSON is ``json.JSONDecodeError``."""
    if json_depth(text) > max_depth:
        raise error(f"{where} is nested deeper than {max_depth} levels: not a file hookbus wrote")
    return json.loads(text)

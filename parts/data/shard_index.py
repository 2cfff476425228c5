"""A shard set's files checked before a sample is read: ``index.json``, the class list,
and every shard against the entry the index gives it.

``hookbus shard`` writes MDS shards (MosaicML ``streaming``'s format) with two columns,
``image`` (the image file's bytes) and ``label`` (an int64), ``index.json`` (one entry
a shard: its file's name, size, sample count and SHA-256) and ``hookbus_shards.json``
(the class names). A folder handed to ``data.shards.path`` may hold anything, so each
is read within bounds and checked before the streaming library sees it:

- :func:`read_index`: at most :data:`MAX_INDEX_BYTES`, nested at most
  :data:`MAX_INDEX_DEPTH` levels, every entry's types, counts and sizes, a file name
  that stays in the folder (no ``/``, ``..`` or hidden name, each once), and hookbus's
  two columns (another writer's set, with string labels or no label column, is named
  as such); the entries as :class:`ShardEntry`;
- :func:`read_classes`: a list of distinct strings, at most :data:`MAX_CLASSES`;
- :func:`check_shard`: the file a regular one (never a FIFO or device) of exactly the
  size the index says (so never a sparse giant: at most :data:`MAX_SHARD_BYTES`), its
  hashes, and its layout, sample by sample: the count, every offset, every image's
  length, and every label one the class list names (``-1`` for a set without classes).
- :func:`read_sample`: one sample during the run, through the same bounded open; a
  shard that no longer fits its index (replaced, shrunk, garbled since it was checked)
  is :class:`InputChangedError`, naming the shard and the sample.

Every refusal is one :class:`~hookbus.engine.errors.DataError` line naming the file
(and the shard and sample), before the first step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from streaming.base.hashing import get_hash, is_hash

from hookbus.engine.bounded_files import (
    loads_json_bounded,
    open_regular,
    read_bounded,
    read_text_bounded,
)
from hookbus.engine.errors import DataError, InputChangedError
from hookbus.parts.data.shard_cache import INDEX_FILE, MAX_INDEX_BYTES

CLASSES_FILE = "hookbus_shards.json"
"""The file beside the shards' ``index.json`` that names the classes."""
MAX_INDEX_DEPTH = 6
"""Deepest nesting of an ``index.json`` (the library's are 4 levels deep)."""
MAX_CLASSES_BYTES = 16 << 20
"""Largest class list file read."""
MAX_CLASSES = 1_000_000
"""Most classes a class list names."""
MAX_SHARD_BYTES = 1 << 30
"""Largest shard file read (1 GiB; ``hookbus shard`` writes 64 MiB ones by default)."""
COLUMNS = {"image": "bytes", "label": "int"}
"""The columns of a shard set hookbus reads: no pickled column, so reading runs no code."""
UNLABELLED = -1
"""The label of every sample of a set without classes (a flat folder's)."""
_LABEL_BYTES = 8
_HEADER = 4  # the sample count, then one offset more than there are samples
_SAMPLE_OVERHEAD = 4 + _LABEL_BYTES  # the image's length, the label


@dataclass(frozen=True)
class ShardEntry:
    """One shard of ``index.json``: its position, file name, size, sample count, the
    hashes recorded for it (``{"sha256": hex}``), and its entry as the library reads it."""

    position: int
    basename: str
    size: int
    samples: int
    hashes: dict[str, str]
    entry: dict[str, Any]

    def name(self, folder: str) -> str:
        """The shard as messages name it: ``FOLDER/shard.00003.mds``."""
        return os.path.join(folder, self.basename)


def _int(value: Any, where: str, low: int, high: int) -> int:
    """``value`` when it is an integer (never a bool) in ``[low, high]``; else DataError."""
    if type(value) is not int or not low <= value <= high:
        raise DataError(f"{where} is {str(value)[:40]!r}: give an integer from {low} to {high}")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(f"{where} is {type(value).__name__}, not an object")
    return value


def read_json(path: Path, what: str, limit: int, depth: int) -> Any:
    """The JSON file ``path`` (regular, at most ``limit`` bytes, nested at most ``depth``
    levels); DataError naming it otherwise."""
    text = read_text_bounded(path, what, limit, error=DataError)
    try:
        return loads_json_bounded(text, f"{what} {path}", max_depth=depth, error=DataError)
    except ValueError as exc:
        raise DataError(f"{what} {path} is not JSON ({exc})") from None


def read_index(path: Path) -> list[ShardEntry]:
    """The shards ``index.json`` at ``path`` lists (see the module's docstring)."""
    index = _mapping(read_json(path, "shard index", MAX_INDEX_BYTES, MAX_INDEX_DEPTH), str(path))
    shards = index.get("shards")
    if index.get("version") != 2 or not isinstance(shards, list):
        raise DataError(
            f"{path} is not a shard index (version 2 with a list of shards): give a folder "
            "written by hookbus shard"
        )
    if not shards:
        raise DataError(f"{path} lists no shards")
    entries = [_entry(item, position, path) for position, item in enumerate(shards)]
    seen: set[str] = set()
    for entry in entries:
        if entry.basename in seen:
            raise DataError(f"{path} lists the shard file {entry.basename} twice")
        seen.add(entry.basename)
    return entries


def _entry(item: Any, position: int, path: Path) -> ShardEntry:
    where = f"{path} shard {position}"
    item = _mapping(item, where)
    if item.get("version") != 2 or item.get("format") != "mds":
        raise DataError(
            f"{where} is not an MDS shard (format {str(item.get('format'))[:20]!r}): hookbus "
            "reads the shards hookbus shard writes"
        )
    names, encodings = item.get("column_names"), item.get("column_encodings")
    sizes = item.get("column_sizes")
    if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)):
        raise DataError(f"{where} has no column names, encodings and sizes")
    columns = dict(zip(names, encodings, strict=False))
    if len(names) != len(encodings) or columns != COLUMNS or names != sorted(COLUMNS):
        raise DataError(
            f"{where} has the columns {str(columns)[:120]}, not hookbus shard's {COLUMNS} "
            "(an image's bytes and an integer label): write the set with hookbus shard"
        )
    if sizes != [None, _LABEL_BYTES]:
        raise DataError(f"{where} has the column sizes {str(sizes)[:60]}, not [None, 8]")
    if item.get("compression") is not None or item.get("zip_data") is not None:
        raise DataError(f"{where} is compressed: hookbus reads uncompressed shards")
    raw = _mapping(item.get("raw_data"), f"{where} raw_data")
    basename = raw.get("basename")
    if not isinstance(basename, str) or not _plain_name(basename):
        raise DataError(f"{where}: shard file name {str(basename)[:80]!r} is not a name")
    size = _int(raw.get("bytes"), f"{where} size", 1, MAX_SHARD_BYTES)
    samples = _int(item.get("samples"), f"{where} sample count", 1, size // _SAMPLE_OVERHEAD)
    hashes = _mapping(raw.get("hashes", {}), f"{where} hashes")
    for algorithm, value in hashes.items():
        if not is_hash(algorithm) or not isinstance(value, str):
            raise DataError(f"{where} records a hash hookbus cannot check: {algorithm!r}")
    library = {
        "version": 2,
        "format": "mds",
        "column_encodings": list(encodings),
        "column_names": list(names),
        "column_sizes": list(sizes),
        "compression": None,
        "hashes": sorted(hashes),
        "raw_data": {"basename": basename, "bytes": size, "hashes": dict(hashes)},
        "samples": samples,
        "size_limit": None,
        "zip_data": None,
    }
    return ShardEntry(position, basename, size, samples, dict(hashes), library)


def _plain_name(name: str) -> bool:
    """Whether ``name`` names a file of the shards' folder itself."""
    return (
        0 < len(name) <= 255
        and os.path.basename(name) == name
        and not name.startswith(".")
        and "\0" not in name
        and name not in (INDEX_FILE, CLASSES_FILE)
    )


def read_classes(path: Path) -> list[str]:
    """The class names of the class list at ``path``: ``{"classes": [NAME, ...]}``."""
    document = read_json(path, "class list", MAX_CLASSES_BYTES, 2)
    classes = document.get("classes") if isinstance(document, dict) else None
    if not isinstance(classes, list) or not all(isinstance(name, str) for name in classes):
        raise DataError(f"class list {path} is not {{'classes': [a list of names]}}")
    if len(classes) > MAX_CLASSES:
        raise DataError(f"class list {path} names {len(classes)} classes, over {MAX_CLASSES}")
    if len(set(classes)) != len(classes):
        raise DataError(f"class list {path} names a class twice")
    return classes


def check_shard(
    path: Path,
    entry: ShardEntry,
    classes: list[str],
    error: type[Exception] = DataError,
    name: str | None = None,
) -> None:
    """Raise ``error`` naming the shard at ``path`` (as ``name``, when given: a URL)
    unless it is a regular file of the size ``entry`` says, matches its recorded hashes,
    and holds ``entry.samples`` samples of an image and a label ``classes`` names."""
    where = str(path) if name is None else name
    data = read_bounded(path, "shard", entry.size, error=error)
    if len(data) != entry.size:
        raise error(
            f"shard {where} is {len(data)} bytes, its index says {entry.size}: truncated, or "
            "not the shard of this index"
        )
    for algorithm, expected in entry.hashes.items():
        if get_hash(algorithm, data) != expected:
            raise error(f"shard {where} does not match its {algorithm} in index.json: corrupt")
    labels = _labels(data, entry, where, error)
    _check_labels(labels, classes, where, error)


def _labels(data: bytes, entry: ShardEntry, where: str, error: type) -> np.ndarray:
    """The labels of the samples of the shard ``data``, once its layout is checked."""
    count = entry.samples
    table = _HEADER + 4 * (count + 1)
    if int.from_bytes(data[:4], "little") != count or table > len(data):
        raise error(f"shard {where} does not hold the {count} samples its index says")
    offsets = np.frombuffer(data, "<u4", count + 1, _HEADER).astype(np.int64)
    steps = np.diff(offsets)
    if offsets[0] < table or offsets[-1] != len(data) or (steps < _SAMPLE_OVERHEAD).any():
        raise error(f"shard {where} has a garbled sample table: corrupt")
    raw = np.frombuffer(data, np.uint8)
    starts = offsets[:-1]
    lengths = raw[starts[:, None] + np.arange(4)].copy().view("<u4").reshape(-1)
    bad = np.flatnonzero(lengths.astype(np.int64) + _SAMPLE_OVERHEAD != steps)
    if bad.size:
        raise error(f"shard {where} sample {int(bad[0])} is garbled: its lengths do not add up")
    ends = offsets[1:] - _LABEL_BYTES
    return raw[ends[:, None] + np.arange(_LABEL_BYTES)].copy().view("<i8").reshape(-1)


def _check_labels(labels: np.ndarray, classes: list[str], where: str, error: type) -> None:
    if classes:
        bad = np.flatnonzero((labels < 0) | (labels >= len(classes)))
        named = f"the class list names {len(classes)} classes (labels 0 to {len(classes) - 1})"
    else:
        bad = np.flatnonzero(labels != UNLABELLED)
        named = f"the class list names no classes (label {UNLABELLED})"
    if bad.size:
        sample = int(bad[0])
        raise error(
            f"shard {where} sample {sample} has the label {int(labels[sample])}, but {named}"
        )


class _Refused(Exception):
    """What :func:`open_regular` says of a shard that is no longer a regular file."""


def read_sample(
    path: Path, entry: ShardEntry, sample: int, classes: list[str]
) -> tuple[bytes, int]:
    """The image bytes and label of sample ``sample`` of the shard at ``path``, read
    through a bounded open; :class:`InputChangedError` naming the shard and the sample
    when the shard no longer fits ``entry`` (or is gone, or no longer a regular file)."""
    where = f"shard {path} sample {sample}: changed since it was checked"
    try:
        with open_regular(path, "shard", error=_Refused) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != entry.size:
                raise InputChangedError(f"{where} ({size} bytes, not {entry.size})")
            handle.seek(_HEADER + 4 * sample)
            begin, end = (int(x) for x in np.frombuffer(handle.read(8), "<u4", 2))
            if not (_HEADER < begin <= end - _SAMPLE_OVERHEAD and end <= size):
                raise InputChangedError(f"{where} (a garbled sample table)")
            handle.seek(begin)
            data = handle.read(end - begin)
    except _Refused as exc:
        raise InputChangedError(f"{where} ({exc})") from None
    except OSError as exc:
        raise InputChangedError(f"{where} ({exc.strerror or exc})") from None
    except ValueError:  # fewer than 8 bytes where the offsets were
        raise InputChangedError(f"{where} (a garbled sample table)") from None
    length = int.from_bytes(data[:4], "little")
    if len(data) != end - begin or length + _SAMPLE_OVERHEAD != len(data):
        raise InputChangedError(f"{where} (its lengths do not add up)")
    label = int.from_bytes(data[-_LABEL_BYTES:], "little", signed=True)
    if not (0 <= label < len(classes) if classes else label == UNLABELLED):
        raise InputChangedError(f"{where} (the label {label} is not in the class list)")
    return data[4:-_LABEL_BYTES], label

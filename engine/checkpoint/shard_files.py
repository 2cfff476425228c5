"""The files of a sharded checkpoint: their checksums, and reading them as data only.

A sharded checkpoint's folder holds the files torch.distributed.checkpoint (DCP) writes
(``__R_N.distcp``, one or more per rank, and ``.metadata``) and ``shards.sha256``, one line
``SHA-256 SIZE NAME`` per file. Each rank hashes the files it wrote; rank 0 writes the
list. Before a load every file is checked against it, the files shared out over the
ranks, and every rank raises the same :class:`CheckpointError` when one is missing,
truncated, corrupt or not listed.

DCP's own reader unpickles ``.metadata`` with no restriction; :class:`DataOnlyReader`
unpickles it allowing only DCP's metadata classes, torch sizes and dtypes, so a crafted
file cannot run code, and :func:`tensor_entries` refuses an entry that is not a tensor
(DCP would unpickle such entries with ``weights_only=False``). What the metadata claims
is checked before anything is allocated or opened: each tensor's shape and chunks, each
chunk stored in one of the folder's own checked files (a plain name, never a path
elsewhere: a FIFO there would hang the read) within its size, and no more bytes claimed
than those files hold. A file of the folder that is a symbolic link is refused: the
files of a checkpoint are its own.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorStorageMetadata,
)

from hookbus.engine.bounded_files import open_regular, read_bounded
from hookbus.engine.errors import CheckpointError

MANIFEST_NAME = "shards.sha256"
MAX_MANIFEST_BYTES = 1 << 20
"""Largest list of checksums read (about 100 bytes a file)."""
MAX_METADATA_BYTES = 1 << 30
"""Largest ``.metadata`` read (about 300 bytes a tensor shard)."""
_ALLOWED = {
    ("pathlib", "PosixPath"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
} | {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "Metadata",
        "MetadataIndex",
        "StorageMeta",
        "TensorProperties",
        "TensorStorageMetadata",
        "_MEM_FORMAT_ENCODING",
    )
}


def file_digest(path: Path, limit: int | None = None) -> tuple[str, int]:
    """The SHA-256 and size of the file at ``path`` (a regular file of at most ``limit``
    bytes: a larger one, a sparse giant, is refused before it is read)."""
    with open_regular(path, "checkpoint shard", limit=limit, error=CheckpointError) as handle:
        size = os.fstat(handle.fileno()).st_size
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
        return digest.hexdigest(), size


def manifest_text(digests: dict[str, tuple[str, int]]) -> str:
    """The text of ``shards.sha256`` for ``{file name: (SHA-256, size)}``."""
    return "".join(f"{digest} {size} {name}\n" for name, (digest, size) in sorted(digests.items()))


def verify_shards(folder: Path) -> None:
    """Raise :class:`CheckpointError` unless every file of ``folder`` is listed in its
    ``shards.sha256`` and matches its size and SHA-256. Distributed, each rank checks a
    share of the files and all raise the same error (a collective: every rank calls it)."""
    problems = _check_share(folder)
    if dist.is_initialized() and dist.get_world_size() > 1:
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, problems)
        problems = [problem for share in gathered for problem in share]
    if problems:
        raise CheckpointError(f"sharded checkpoint {folder}: {'; '.join(sorted(problems)[:4])}")


def _check_share(folder: Path) -> list[str]:
    if not folder.is_dir():
        return [f"its folder {folder.name} is missing"]
    try:
        text = read_bounded(
            folder / MANIFEST_NAME, "shard checksums", MAX_MANIFEST_BYTES, error=CheckpointError
        ).decode("ascii")
        listed: dict[str, tuple[str, int]] = {}
        for line in text.splitlines():
            digest, size_text, name = line.split(" ", 2)
            listed[name] = (digest, int(size_text))
    except (CheckpointError, ValueError, UnicodeDecodeError) as exc:
        return [f"{MANIFEST_NAME} is missing or malformed ({str(exc)[:120]})"]
    present = {entry.name for entry in folder.iterdir()} - {MANIFEST_NAME}
    problems = [f"{name} is missing" for name in sorted(set(listed) - present)]
    problems += [f"{name} is not in {MANIFEST_NAME}" for name in sorted(present - set(listed))]
    rank, ranks = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    for index, name in enumerate(sorted(set(listed) & present)):
        if index % ranks != rank:
            continue
        digest, size = listed[name]
        if (folder / name).is_symlink():
            problems.append(f"{name} is a symbolic link: a checkpoint's files are its own")
            continue
        try:
            actual, actual_size = file_digest(folder / name, limit=size)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        if actual_size != size:
            problems.append(f"{name} is {actual_size} bytes, {MANIFEST_NAME} says {size}")
        elif actual != digest:
            problems.append(f"{name} does not match its SHA-256: corrupt")
    return problems


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not checkpoint metadata")


class DataOnlyReader(FileSystemReader):
    """DCP's file reader, its ``.metadata`` unpickled as data only (see the module)."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = Path(self.path) / ".metadata"
        data = read_bounded(path, "shard metadata", MAX_METADATA_BYTES, error=CheckpointError)
        try:
            metadata = _DataOnly(io.BytesIO(data)).load()
        except Exception as exc:
            raise CheckpointError(f"cannot read {path}: {str(exc)[:200]}") from None
        if not isinstance(metadata, Metadata):
            raise CheckpointError(f"{path} is not checkpoint metadata")
        storage_meta = getattr(metadata, "storage_meta", None) or StorageMeta()
        storage_meta.load_id = self.load_id
        metadata.storage_meta = storage_meta
        return metadata


def tensor_entries(folder: Path, keys: list[str]) -> dict[str, TensorStorageMetadata]:
    """The metadata of the tensors ``keys`` in the shards of ``folder``, each checked
    against the folder's files (see the module); a key missing, not a tensor, or
    claiming what the files do not hold is a :class:`CheckpointError`."""
    metadata = DataOnlyReader(folder).read_metadata()
    stored = _stored_chunks(folder, metadata)
    entries = {}
    for key in keys:
        entry = metadata.state_dict_metadata.get(key)
        if not isinstance(entry, TensorStorageMetadata):
            what = "missing" if entry is None else "not a tensor"
            raise CheckpointError(f"sharded checkpoint {folder}: {key} is {what} in its shards")
        problem = _claim_problem(entry, stored.get(key, {}))
        if problem is not None:
            raise CheckpointError(f"sharded checkpoint {folder}: {key} {problem}")
        entries[key] = entry
    return entries


def tensor_bytes(entry: TensorStorageMetadata) -> int:
    """The bytes of the whole tensor ``entry`` describes (checked by :func:`tensor_entries`)."""
    return math.prod(entry.size) * entry.properties.dtype.itemsize


def _stored_chunks(folder: Path, metadata: Metadata) -> dict[str, dict[tuple[int, ...], int]]:
    """``{key: {chunk offsets: stored bytes}}`` from the metadata's storage entries, each
    one a byte range of a file of ``folder`` that its checksums list."""
    files = {
        entry.name: entry.stat().st_size
        for entry in folder.iterdir()
        if entry.name not in (MANIFEST_NAME, ".metadata")
    }
    storage = metadata.storage_data
    if not isinstance(storage, dict):
        raise CheckpointError(f"sharded checkpoint {folder}: its metadata lists no storage")
    stored: dict[str, dict[tuple[int, ...], int]] = {}
    for index, info in storage.items():
        if not (isinstance(index, MetadataIndex) and isinstance(info, _StorageInfo)):
            raise CheckpointError(f"sharded checkpoint {folder}: a storage entry is not one")
        where = f"sharded checkpoint {folder}: {str(index.fqn)[:80]}"
        name, offset, length = info.relative_path, info.offset, info.length
        if not isinstance(name, str) or name not in files:
            raise CheckpointError(f"{where} is stored in {str(name)[:80]!r}, not a file of its own")
        if not (_count(offset) and _count(length) and offset + length <= files[name]):
            raise CheckpointError(f"{where} claims bytes past the end of {name}")
        if info.transform_descriptors:
            raise CheckpointError(f"{where} is stored transformed: hookbus writes plain tensors")
        offsets = _shape(index.offset)
        if offsets is None:
            raise CheckpointError(f"{where} has a malformed chunk offset")
        stored.setdefault(str(index.fqn), {})[offsets] = length
    return stored


def _claim_problem(entry: TensorStorageMetadata, stored: dict[tuple[int, ...], int]) -> str | None:
    """Why ``entry`` cannot be what its chunks' stored bytes hold, or None."""
    shape = _shape(entry.size)
    dtype = getattr(entry.properties, "dtype", None)
    if shape is None or not isinstance(dtype, torch.dtype) or not isinstance(entry.chunks, list):
        return "has a malformed shape, dtype or chunk list"
    covered = 0
    for chunk in entry.chunks:
        offsets, sizes = _shape(chunk.offsets), _shape(chunk.sizes)
        if offsets is None or sizes is None or not len(offsets) == len(sizes) == len(shape):
            return "has a malformed chunk"
        if any(o + n > dim for o, n, dim in zip(offsets, sizes, shape, strict=True)):
            return f"has a chunk outside its shape {list(shape)}"
        claimed = math.prod(sizes) * dtype.itemsize
        if claimed > stored.get(offsets, -1):
            return (
                f"claims {claimed} bytes for a chunk of shape {list(sizes)}, and its files hold "
                f"{max(stored.get(offsets, 0), 0)} for it: the metadata does not fit the shards"
            )
        covered += math.prod(sizes)
    if covered != math.prod(shape):
        return f"has chunks of {covered} elements for a shape of {math.prod(shape)}"
    return None


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _shape(value: Any) -> tuple[int, ...] | None:
    """``value`` as a tuple of non-negative ints (a torch.Size, a list), or None."""
    if not isinstance(value, (tuple, list)) or len(value) > 64:
        return None
    return tuple(value) if all(_count(item) for item in value) else None

"""A file of model weights that a user names, read as data: safetensors, a torch state
dict, or a hookbus checkpoint.

The format is told by the file's first bytes, not its name: a safetensors file starts
with the 8-byte length of its JSON header and then ``{``; anything else goes to
``torch.load(weights_only=True)``, which reads tensors and plain containers and refuses
every other Python object (a pickle that would run code). Every failure is a
:class:`~hookbus.engine.errors.CheckpointError` of one line naming the file.
"""

from __future__ import annotations

import hashlib
import pickle
import struct
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hookbus.engine.bounded_files import check_regular, open_regular
from hookbus.engine.checkpoint.checkpoint_io import FORMAT
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from hookbus.engine.errors import CheckpointError

CONTAINERS = ("state_dict", "model", "teacher", "module")
"""Keys under which training scripts nest a state dict (``{"state_dict": {...}}``); the
first one present whose value is a dict of tensors is taken."""

PLAIN_DICT_HINT = (
    "save the weights as a state dict of tensors (torch.save(model.state_dict(), path)) "
    "or as safetensors"
)
"""What to do about a file that is no state dict, for the end of its message."""


def is_safetensors(path: Path) -> bool:
    """Whether ``path`` starts as a safetensors file does: a little-endian 8-byte header
    length, then the JSON header's ``{``."""
    with open_regular(path, "weights file", error=CheckpointError) as file:
        head = file.read(9)
    if len(head) < 9:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return head[8:9] == b"{" and 0 < length < (1 << 32)


def _load_safetensors(path: Path) -> dict[str, Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise CheckpointError(
            f"weights file {path} is a damaged safetensors file (truncated or garbled?): {problem}"
        ) from None


def _load_torch(path: Path) -> Any:
    try:
        with warnings.catch_warnings():  # torch warns of old pickle protocols on stderr
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(
            f"weights file {path} holds Python objects besides tensors (a pickle that could "
            f"run code), which hookbus never loads: {PLAIN_DICT_HINT}"
        ) from None
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except Exception as exc:  # the unpickler's errors on bytes that are no torch file
        problem = str(exc).splitlines()[0].split(". ")[0] if str(exc) else type(exc).__name__
        raise CheckpointError(
            f"weights file {path} cannot be read as safetensors or a torch file (truncated "
            f"or garbled?): {problem}"
        ) from None


def _tensors_only(loaded: Any, path: Path) -> dict[str, Tensor]:
    if isinstance(loaded, dict) and not all(isinstance(v, Tensor) for v in loaded.values()):
        for key in CONTAINERS:
            inner = loaded.get(key)
            if (
                isinstance(inner, dict)
                and inner
                and all(isinstance(v, Tensor) for v in inner.values())
            ):
                return dict(inner)
    if (
        not isinstance(loaded, dict)
        or not loaded
        or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in loaded.items())
    ):
        kind = "an empty dict" if loaded == {} else f"a {type(loaded).__name__}"
        raise CheckpointError(
            f"weights file {path} holds {kind}, not a state dict of tensors (nor one under "
            f"{', '.join(CONTAINERS)}): {PLAIN_DICT_HINT}"
        )
    return dict(loaded)


def read_weights_file(path: Path) -> dict[str, Tensor]:
    """The tensors in the weights file ``path``, by key, as the file names them.

    A hookbus checkpoint (verified against its checksum file) gives its whole model's
    state dict; a safetensors file its tensors; a torch file its state dict, or the one
    nested under one of :data:`CONTAINERS`. Raises :class:`CheckpointError` (one line)
    for a missing, empty, truncated or garbled file, something not a regular file, a
    pickle with objects besides tensors, or content that is no state dict.
    """
    check_regular(path, "weights file", error=CheckpointError)
    if is_safetensors(path):
        return _tensors_only(_load_safetensors(path), path)
    loaded = _load_torch(path)
    if isinstance(loaded, dict) and loaded.get("format") == FORMAT:
        model = load_whole_checkpoint(path)["model"]
        return _tensors_only(model, path)
    return _tensors_only(loaded, path)


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file ``path``, in hex (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open_regular(path, "weights file", error=CheckpointError) as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

"""The on-disk cache of ``hookbus eval``'s features: one file per encoder and data, named
by a hash of the encoder file's SHA-256, the images' fingerprint and what is extracted."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hookbus.engine.bounded_files import open_regular, read_bounded
from hookbus.engine.checkpoint.checkpoint_io import checksum_path, write_output_file
from hookbus.engine.errors import CheckpointError, UserError
from hookbus.eval_features import SplitFeatures

logger = logging.getLogger("hookbus")

CACHE_DIR = "eval_cache"
"""The cache's folder in the evaluation's output folder."""

FORMAT = "hookbus-eval-features-1"
"""The format tag of a cache file; another tag is recomputed."""

MAX_SIDECAR_BYTES = 1024
"""The most bytes a checkpoint's checksum file may hold."""


def source_digest(source: Path) -> str:
    """The SHA-256 of the encoder file ``source``: its checksum file's, for a checkpoint
    (verified when the encoder was loaded), else the file's bytes hashed."""
    sidecar = checksum_path(source)
    if sidecar.is_file():
        text = read_bounded(sidecar, "checksum file", MAX_SIDECAR_BYTES, error=CheckpointError)
        return text.decode("ascii", errors="replace").split()[0]
    hasher = hashlib.sha256()
    with open_regular(source, "encoder file", error=CheckpointError) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def cache_key(settings: dict[str, Any]) -> str:
    """A short hash of ``settings`` (JSON values): the cache file's name."""
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cache_path(out: Path, key: str) -> Path:
    """Where the features of ``key`` are kept under the output folder ``out``."""
    return out / CACHE_DIR / f"features-{key}.pt"


def check_cache_place(path: Path) -> None:
    """Refuse a cache path that exists and is not a regular file (a folder, a FIFO, a
    link to a device), or a cache folder that is a file: a UserError naming it, before
    anything is computed."""
    if path.parent.exists() and not path.parent.is_dir():
        raise UserError(
            f"feature cache folder {path.parent} is not a folder: remove it, and hookbus eval "
            "makes it again"
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"feature cache {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise UserError(
            f"feature cache {path} is not a regular file: remove it, and hookbus eval writes "
            "the cache again"
        )


def load_cache(path: Path, settings: dict[str, Any]) -> dict[str, SplitFeatures] | None:
    """The splits' features kept at ``path`` for ``settings``, or None when there are
    none, or when the file is unreadable, for other settings, or malformed (said in a
    warning: the features are then computed again and the file replaced)."""
    if not path.exists():
        return None
    try:
        with open_regular(path, "feature cache") as handle:
            saved = torch.load(handle, map_location="cpu", weights_only=True)
        splits = _checked(saved, settings)
    except Exception as exc:  # a cache that cannot be used is computed again, whatever failed
        reason = " ".join(str(exc).split()).split(". ")[0][:160]
        logger.warning("feature cache %s cannot be used (%s): computing the features", path, reason)
        return None
    if splits is None:
        logger.warning("feature cache %s was made for other settings: computing the features", path)
    return splits


def _checked(saved: Any, settings: dict[str, Any]) -> dict[str, SplitFeatures] | None:
    """The splits in ``saved`` when it is a cache file of ``settings`` with consistent
    tensors; None for other settings; ValueError when malformed."""
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError("not a hookbus feature cache")
    if saved.get("settings") != json.loads(json.dumps(settings)):
        return None
    splits = {}
    for name in ("train", "test"):
        split = saved.get(name)
        if not isinstance(split, dict):
            raise ValueError(f"no {name} split")
        labels, features = split.get("labels"), split.get("features")
        if not isinstance(labels, Tensor) or labels.dim() != 1 or not isinstance(features, dict):
            raise ValueError(f"the {name} split's labels or features are malformed")
        for key, value in features.items():
            if not isinstance(value, Tensor) or value.dim() != 2 or len(value) != len(labels):
                raise ValueError(f"the {name} features {key!r} do not match the labels")
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"the {name} features {key!r} are not all finite")
        splits[name] = SplitFeatures(dict(features), labels.long())
    return splits


def save_cache(path: Path, settings: dict[str, Any], splits: dict[str, SplitFeatures]) -> None:
    """Keep ``splits`` at ``path`` for ``settings``: all or nothing (a temporary file,
    fsync, rename), loaded back with ``weights_only=True``."""
    payload = {"format": FORMAT, "settings": settings}
    for name, split in splits.items():
        payload[name] = {"labels": split.labels, "features": split.features}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_output_file(path, buffer.getvalue())

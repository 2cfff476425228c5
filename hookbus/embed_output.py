"""The file ``hookbus embed`` writes: paths and embeddings in torch, NumPy or CSV form,
through a temporary file and a rename."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from hookbus.engine.errors import UserError
from hookbus.output_paths import check_destination, resolved, write_output

FORMATS: dict[str, tuple[str, ...]] = {
    "pt": (".pt", ".pth", ".torch"),
    "npz": (".npz",),
    "csv": (".csv",),
}
"""``{format: the file name endings that choose it}``."""


def output_format(out: Path, chosen: str | None = None) -> str:
    """The format of ``out``: ``chosen``, else the one its ending names (:data:`FORMATS`)."""
    if chosen is not None:
        if chosen not in FORMATS:
            raise UserError(f"unknown embeddings format {chosen!r}: {', '.join(FORMATS)}")
        return chosen
    for name, endings in FORMATS.items():
        if out.suffix.lower() in endings:
            return name
    known = ", ".join(ending for endings in FORMATS.values() for ending in endings)
    raise UserError(
        f"{out}: the file name does not say the format ({known}): rename it or give --format"
    )


def check_output(
    out: Path,
    source: Path,
    *,
    inputs: Sequence[Path] = (),
    files: Sequence[Path] = (),
    overwrite: bool = False,
) -> None:
    """Refuse to write ``out`` where it is ``source``, a file hookbus keeps in a run
    directory (a checkpoint, its checksum, ``config.yaml``, ``metrics.json``...: see
    :func:`hookbus.output_paths.check_destination`), one of the images named in
    ``inputs`` or a path inside a folder named there (through any link or ``..``), a
    hard link of one of the image ``files``, a folder, or, unless ``overwrite``, an
    existing file."""
    check_destination(out, [source])
    check_outside_inputs(out, inputs, files)
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists: give --overwrite to replace it, or another path")


def check_outside_inputs(out: Path, inputs: Sequence[Path], files: Sequence[Path] = ()) -> None:
    """Refuse an ``out`` that is one of ``inputs`` (image files and folders as named) or
    lies inside one of the folders, by its resolved path, or that is a hard link of one
    of the image ``files`` (looked at only when ``out`` has more than one link)."""
    place = resolved(out.parent) / out.name
    targets = {place, resolved(out)}
    for named in inputs:
        real = resolved(named)
        if real in targets or (named.is_dir() and any(real in t.parents for t in targets)):
            what = "inside the image folder" if named.is_dir() else "the input image"
            raise UserError(
                f"{out} is {what} {named}, an input of this command: writing it there could "
                "destroy or mix with the images; give a path outside the inputs"
            )
    try:
        status = os.stat(out)
    except OSError:
        return
    if status.st_nlink < 2:
        return
    for file in files:
        try:
            other = os.stat(file)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (status.st_dev, status.st_ino):
            raise UserError(
                f"{out} is the input image {file} (a hard link to it): writing it would "
                "destroy the image; give a path outside the inputs"
            )


def write_embeddings(paths: Sequence[str], embeddings: Tensor, out: Path, form: str) -> None:
    """Write ``paths`` and their ``embeddings`` (``[N, D]``) to ``out`` in the format
    ``form``, all or nothing (:func:`hookbus.output_paths.write_output`: a temporary
    file beside it, fsync, rename):

    * ``pt``: ``torch.save`` of ``{"paths": [str], "embeddings": float32 Tensor [N, D]}``;
      ``torch.load(out, weights_only=True)`` reads it.
    * ``npz``: ``paths`` (a string array) and ``embeddings`` (float32 ``[N, D]``);
      ``np.load(out)`` reads it, without pickles.
    * ``csv``: a header ``path,e0,...,e{D-1}``, then one row per image, the values
      written to round-trip float32.
    """
    write_output(out, _encode(paths, embeddings.float().cpu(), form))


def _encode(paths: Sequence[str], embeddings: Tensor, form: str) -> bytes:
    """The bytes of the file in the format ``form``."""
    buffer = io.BytesIO()
    if form == "pt":
        torch.save({"paths": list(paths), "embeddings": embeddings.contiguous()}, buffer)
    elif form == "npz":
        np.savez(buffer, paths=np.array(list(paths), dtype=str), embeddings=embeddings.numpy())
    else:
        text = io.TextIOWrapper(buffer, encoding="utf-8", newline="")
        writer = csv.writer(text)
        writer.writerow(["path", *(f"e{column}" for column in range(embeddings.shape[1]))])
        for path, row in zip(paths, embeddings.tolist(), strict=True):
            writer.writerow([path, *(f"{value:.9g}" for value in row)])
        text.flush()
        text.detach()
    return buffer.getvalue()

"""The evaluation suite of a trained encoder: ``hookbus eval`` and :func:`evaluate`.

The encoder's features of a labelled train and test split are computed once (on every
rank's share of the split, gathered in order) and kept on disk, keyed by the hash of the
encoder file and the images; then kNN at several k with DINO's weighted vote, a linear
probe over a learning-rate x weight-decay grid chosen on held-out train images, low-shot
probes on 1% and 10% of the labels, retrieval mAP and recall@k, and, for a ViT, the same
on the concatenated class tokens of its last blocks.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hookbus.embed_source import Encoder, load_encoder
from hookbus.engine.checkpoint.checkpoint_io import checksum_path
from hookbus.engine.errors import UserError, writing
from hookbus.engine.process import distributed
from hookbus.engine.process.launch_env import launch_environment
from hookbus.engine.process.threads import one_torch_thread
from hookbus.eval_cache import (
    cache_key,
    cache_path,
    check_cache_place,
    load_cache,
    save_cache,
    source_digest,
)
from hookbus.eval_data import LabelledData, labelled_data
from hookbus.eval_features import (
    Extraction,
    SplitFeatures,
    ViTParts,
    check_last_blocks,
    extract_split,
    last_blocks_name,
)
from hookbus.eval_probe import ProbeSettings, linear_probe, low_shot
from hookbus.eval_retrieval import retrieval
from hookbus.eval_table import RESULTS_FILE, results_table
from hookbus.output_paths import check_destination, write_output
from hookbus.parts.meters.frozen_eval import knn_accuracy
from hookbus.parts.models import build_model

logger = logging.getLogger("hookbus")

DEVICES = ("auto", "cpu", "cuda")
"""The devices the features are computed on; ``auto`` is CUDA when present."""


@dataclass(frozen=True)
class EvalSettings:
    """What :func:`evaluate` computes; an empty tuple (or False, or 0) switches a part off.

    ``knn_k``: the k of the kNN classifiers (weighted vote, ``knn_temperature``; k above
    the train split's size takes every train image). ``linear``: the linear probe of
    ``probe``. ``low_shot``: fractions of the train labels, each drawn ``low_shot_draws``
    times, probed at the linear probe's chosen point. ``retrieval_k``: the k of
    recall@k (mAP beside it). ``last_blocks``: for ViTs, the class tokens of the last
    blocks, concatenated. ``seed``: the held-out part, the low-shot draws and the
    probes' batch order.
    """

    knn_k: tuple[int, ...] = (10, 20, 200)
    knn_temperature: float = 0.07
    linear: bool = True
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    low_shot: tuple[float, ...] = (0.01, 0.1)
    low_shot_draws: int = 5
    retrieval_k: tuple[int, ...] = (1, 5, 10)
    last_blocks: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if any(k < 1 for k in self.knn_k) or any(k < 1 for k in self.retrieval_k):
            raise UserError(f"k must be at least 1: kNN {self.knn_k}, recall@{self.retrieval_k}")
        if not (math.isfinite(self.knn_temperature) and self.knn_temperature > 0):
            raise UserError(f"the kNN temperature must be positive: {self.knn_temperature}")
        if any(not 0 < fraction < 1 for fraction in self.low_shot):
            raise UserError(f"low-shot fractions must be in (0, 1): {self.low_shot}")
        if self.low_shot and self.low_shot_draws < 1:
            raise UserError(f"low-shot draws must be at least 1: {self.low_shot_draws}")
        if self.last_blocks < 0:
            raise UserError(f"--last-blocks must be 0 (off) or more: {self.last_blocks}")
        if self.low_shot and not self.linear:
            raise UserError(
                "the low-shot probes use the linear probe's chosen learning rate and weight "
                "decay: switch the low-shot part off too (--no-low-shot), or keep the probe"
            )


@dataclass(frozen=True)
class Evaluation:
    """The results of :func:`evaluate`: ``results`` as written to ``path`` (JSON)."""

    results: dict[str, Any]
    path: Path | None

    def table(self) -> str:
        """The results as a text table, one row per kind of features."""
        return results_table(self.results)


def evaluate(
    source: str | Path,
    data: str | Path | None = None,
    *,
    recipe: str | Path | None = None,
    out: str | Path | None = None,
    settings: EvalSettings | None = None,
    pictures: bool = False,
    batch_size: int = 128,
    num_workers: int | None = None,
    device: str = "auto",
    progress: bool = False,
) -> Evaluation:
    """Evaluate the encoder of ``source`` on ``data``; the results are written to
    ``out/eval.json`` and returned.

    ``source`` is a checkpoint, a run directory (its newest valid checkpoint) or a
    ``hookbus export`` file with ``recipe`` (see
    :func:`hookbus.embed_source.load_encoder`). ``data`` is None (the run's own train and
    test splits), ``"digits"`` or a folder holding ``train/`` and ``test/`` class folders
    (:func:`hookbus.eval_data.labelled_data`). ``out`` defaults to the run directory (the
    checkpoint's folder); an exported file needs one. The features are cached in
    ``out/eval_cache``. With ``pictures``, the t-SNE map, the nearest-neighbour grid, for
    a ViT the attention maps and patch PCA colours, go to ``out/pictures`` and, with the
    projector's embedding, to ``out/tensorboard``.

    In a process group (``torchrun``), every rank encodes its share of each split and
    every rank returns the same results; rank 0 writes the files.

    Example::

        from hookbus import evaluate

        result = evaluate("runs/simclr_digits")   # the run's own digits splits
        print(result.table())
        result.results["knn"]["backbone"]["20"]   # kNN top-1 at k=20
    """
    settings = settings or EvalSettings()
    started = time.perf_counter()
    target = _device(device)
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, not {batch_size}")
    encoder = load_encoder(source, recipe, require_image_files=False)
    distributed.init_from_environment(encoder.config)
    folder = _output_folder(Path(source), encoder, out)
    results_path = folder / RESULTS_FILE
    _check_results_place(results_path, encoder.source)
    model = _model(encoder).to(target)
    labelled = labelled_data(encoder.config, data)
    parts = check_last_blocks(model, settings.last_blocks)
    key = _cache_settings(encoder, labelled, settings, parts)
    cached_at = cache_path(folder, cache_key(key))
    check_cache_place(cached_at)
    seconds = {"load": time.perf_counter() - started}
    splits, cached = _features(
        model,
        labelled,
        settings,
        parts,
        key,
        cached_at,
        target,
        batch_size,
        num_workers,
        progress,
        seconds,
    )
    results: dict[str, Any] | None = None
    if distributed.rank() == 0:
        results = _describe(encoder, labelled, splits, settings, parts, target, cached)
        scores = score(splits, settings, seconds)
        results["not_applicable"] = results.get("not_applicable", {}) | scores.pop(
            "not_applicable", {}
        )
        results |= scores
        if pictures:
            from hookbus.pictures import draw_pictures

            results["pictures"] = draw_pictures(model, labelled, splits, folder, settings.seed)
            seconds["pictures"] = time.perf_counter() - started - sum(seconds.values())
        seconds["total"] = time.perf_counter() - started
        results["seconds"] = seconds
        with writing(folder):
            folder.mkdir(parents=True, exist_ok=True)
        write_output(results_path, (json.dumps(results, indent=2) + "\n").encode())
    return Evaluation(_shared(results), results_path)


def score(
    splits: dict[str, SplitFeatures], settings: EvalSettings, seconds: dict[str, float]
) -> dict[str, Any]:
    """The scores of the cached ``splits``, each part timed into ``seconds``, on one torch
    thread: the kNN votes, probes and retrieval of an evaluation are small products and
    copies, which a pool of threads makes several times slower on busy cores (kNN at
    three k on 800 x 200 ResNet-18 features: 0.65 s on the pool, 0.07 s on one thread,
    at a load average of 11 on 2 cores)."""
    with one_torch_thread():
        return _score(splits, settings, seconds)


def _score(
    splits: dict[str, SplitFeatures], settings: EvalSettings, seconds: dict[str, float]
) -> dict[str, Any]:
    """:func:`score`'s work."""
    train, test = splits["train"], splits["test"]
    results: dict[str, Any] = {}
    names = list(train.features)
    clock = time.perf_counter()

    def lap(part: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[part] = now - clock
        clock = now

    skipped: dict[str, str] = {}
    knn_k = [k for k in settings.knn_k if k <= len(train.labels)]
    recall_k = [k for k in settings.retrieval_k if k <= len(train.labels)]
    for part, asked, kept in (
        ("kNN", settings.knn_k, knn_k),
        ("R@", settings.retrieval_k, recall_k),
    ):
        for k in sorted(set(asked) - set(kept)):
            skipped[f"{part} k={k}" if part == "kNN" else f"R@{k}"] = (
                f"k is more than the {len(train.labels)} train images"
            )
    if skipped:
        results["not_applicable"] = skipped
    if knn_k:
        results["knn"] = {"vote": "weighted", "temperature": settings.knn_temperature}
        for name in names:
            results["knn"][name] = {
                str(k): knn_accuracy(
                    train.features[name],
                    train.labels,
                    test.features[name],
                    test.labels,
                    k=k,
                    vote="weighted",
                    temperature=settings.knn_temperature,
                )
                for k in knn_k
            }
        lap("knn")
    points = {}
    if settings.linear:
        results["linear"] = {}
        for name in names:
            found = linear_probe(
                (train.features[name], train.labels),
                (test.features[name], test.labels),
                settings.probe,
                settings.seed,
            )
            results["linear"][name] = found.to_json()
            points[name] = (found.lr, found.weight_decay)
        lap("linear")
    if settings.low_shot:
        results["low_shot"] = {}
        for name in names:
            results["low_shot"][name] = {
                str(fraction): low_shot(
                    (train.features[name], train.labels),
                    (test.features[name], test.labels),
                    fraction,
                    settings.low_shot_draws,
                    points[name],
                    settings.probe,
                    settings.seed,
                ).to_json()
                for fraction in settings.low_shot
            }
        lap("low_shot")
    if recall_k:
        results["retrieval"] = {
            name: retrieval(
                (train.features[name], train.labels),
                (test.features[name], test.labels),
                recall_k,
            ).to_json()
            for name in names
        }
        lap("retrieval")
    return results


def _device(device: str) -> torch.device:
    """The torch device ``device`` (one of :data:`DEVICES`) names."""
    if device not in DEVICES:
        raise UserError(f"unknown device {device!r}: {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda: CUDA is not available on this machine; use cpu")
    if device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    local_rank = launch_environment().local_rank
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def _output_folder(source: Path, encoder: Encoder, out: str | Path | None) -> Path:
    """``out``, else the run directory of a checkpoint; an exported file needs ``out``."""
    if out is not None:
        folder = Path(out)
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--out {folder} is not a folder: give the folder to write into")
        return folder
    if source.is_dir():
        return source
    if checksum_path(encoder.source).exists():
        return encoder.source.parent
    raise UserError(
        f"{source} is an exported backbone, outside any run directory: give the folder to "
        "write the results into (--out)"
    )


def _check_results_place(path: Path, source: Path) -> None:
    """Refuse to write ``eval.json`` over the encoder, a file of a run other than the
    results themselves, or through a symbolic or hard link (which may lead to one)."""
    if path.is_symlink():
        raise UserError(
            f"{path} is a symbolic link (to {os.readlink(path)}): remove it, or give another "
            "--out folder"
        )
    if path.is_file() and path.stat().st_nlink > 1:
        raise UserError(
            f"{path} is a hard link, another name of a file that may be a run's: remove it, "
            "or give another --out folder"
        )
    check_destination(path, [source], allowed=[path])


def _model(encoder: Encoder) -> nn.Module:
    """The run's model around the loaded backbone, in eval mode: its ``encode`` gives the
    features the run's own evaluations read (the class token, or I-JEPA's mean patch
    token). The backbone weights given by a linear evaluation's or fine-tuning's
    ``checkpoint`` setting are not read again: the loaded ones are the run's."""
    cfg = encoder.config
    model_cfg = cfg.model.model_copy(
        update={
            "linear_eval": cfg.model.linear_eval.model_copy(update={"checkpoint": None}),
            "fine_tune": cfg.model.fine_tune.model_copy(update={"checkpoint": None}),
        }
    )
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg.model_copy(update={"model": model_cfg}), backbone=encoder.backbone)
    return model.eval()


def _cache_settings(
    encoder: Encoder, labelled: LabelledData, settings: EvalSettings, parts: ViTParts | None
) -> dict[str, Any]:
    """What the cached features depend on."""
    return {
        "encoder_sha256": source_digest(encoder.source),
        "images": labelled.fingerprint,
        "last_blocks": settings.last_blocks if parts is not None else 0,
        "pooling": parts.pooling if parts is not None else None,
        "hookbus": version("hookbus"),
    }


def _features(
    model: nn.Module,
    labelled: LabelledData,
    settings: EvalSettings,
    parts: ViTParts | None,
    key: dict[str, Any],
    cached_at: Path,
    target: torch.device,
    batch_size: int,
    num_workers: int | None,
    progress: bool,
    seconds: dict[str, float],
) -> tuple[dict[str, SplitFeatures], bool]:
    """The features of both splits, from the cache (read by rank 0) or computed by every
    rank and cached by rank 0; and whether they came from the cache."""
    clock = time.perf_counter()
    splits = load_cache(cached_at, key) if distributed.rank() == 0 else None
    if _shared(splits is not None):
        seconds["extract"] = 0.0
        seconds["cache_read"] = time.perf_counter() - clock
        return splits or {}, True
    how = Extraction(
        batch_size=batch_size,
        num_workers=labelled.workers if num_workers is None else num_workers,
        device=target,
        blocks=settings.last_blocks,
        parts=parts,
        progress=progress,
    )
    splits = {
        name: extract_split(model, dataset, labelled.collate, how, name)
        for name, dataset in (("train", labelled.train), ("test", labelled.test))
    }
    seconds["extract"] = time.perf_counter() - clock
    if distributed.rank() == 0:
        clock = time.perf_counter()
        with writing(cached_at.parent):
            cached_at.parent.mkdir(parents=True, exist_ok=True)
        save_cache(cached_at, key, splits)
        seconds["cache_write"] = time.perf_counter() - clock
    return splits, False


def _describe(
    encoder: Encoder,
    labelled: LabelledData,
    splits: dict[str, SplitFeatures],
    settings: EvalSettings,
    parts: ViTParts | None,
    target: torch.device,
    cached: bool,
) -> dict[str, Any]:
    """What was evaluated, on what, how."""
    train, test = splits["train"], splits["test"]
    features: dict[str, dict[str, Any]] = {
        name: {"dims": int(value.shape[1])} for name, value in train.features.items()
    }
    if parts is not None:
        name = last_blocks_name(settings.last_blocks)
        features[name] |= {"blocks": settings.last_blocks, "pooling": parts.pooling}
    described: dict[str, Any] = {
        "source": str(encoder.source),
        "data": labelled.description,
        "classes": labelled.classes,
        "train_images": len(train.labels),
        "test_images": len(test.labels),
        "features": features,
        "seed": settings.seed,
        "world_size": distributed.world_size(),
        "device": str(target),
        "cached_features": cached,
    }
    if parts is None and settings.last_blocks:
        described["not_applicable"] = {
            "last_blocks": f"the backbone ({encoder.config.model.backbone.name}) is not a ViT"
        }
    return described


def _shared(value: Any) -> Any:
    """``value`` of rank 0, on every rank (itself in one process)."""
    if not distributed.is_distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]

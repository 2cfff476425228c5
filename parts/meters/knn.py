"""k-nearest-neighbour classification of backbone features, against a memory bank."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module
from torch.types import Device

from hookbus.engine.process import distributed
from hookbus.parts.meters.base import Meter

KnnVote = Literal["majority", "weighted"]
"""How the k neighbours vote: one vote each, or weighted by ``exp(similarity / T)``."""

Encode = Callable[[Tensor], Tensor]
"""A model's ``encode``: images ``[B, C, H, W]`` to features ``[B, D]``."""


def knn_predict(
    queries: Tensor,
    memory: Tensor,
    memory_labels: Tensor,
    k: int,
    num_classes: int,
    vote: KnnVote = "majority",
    temperature: float = 0.07,
) -> Tensor:
    """Predicted classes ``[Q]`` of L2-normalised ``queries`` ``[Q, D]``.

    Each query takes the ``k`` memory rows (L2-normalised, ``[M, D]``) of highest cosine
    similarity (all of them when ``M < k``) and predicts the class of highest score. With
    ``vote="majority"`` each neighbour adds one to its class's score; with
    ``vote="weighted"`` (DINO's kNN evaluation) a neighbour of similarity ``s`` adds
    ``exp(s / temperature)``, so closer neighbours count more. A tie goes to the smallest
    class id.
    """
    similarity = queries @ memory.T
    nearest = similarity.topk(min(k, len(memory)), dim=1)
    neighbour_labels = memory_labels[nearest.indices]
    if vote == "weighted":
        weights = (nearest.values / temperature).exp()
    elif vote == "majority":
        weights = torch.ones_like(nearest.values)
    else:
        raise ValueError(f"vote must be 'majority' or 'weighted', got {vote!r}")
    scores = torch.zeros(len(queries), num_classes, device=queries.device, dtype=weights.dtype)
    scores.scatter_add_(1, neighbour_labels, weights)
    return scores.argmax(dim=1)


def extract_features(
    encode: Callable[[Tensor], Tensor], loader: Iterable[dict], device: Device
) -> tuple[Tensor, Tensor]:
    """``encode(batch["image"])`` over the loader: features ``[N, D]`` and labels ``[N]``.

    Runs under ``torch.no_grad``; the caller puts the model in eval mode. Both tensors
    are on ``device``, in the loader's order.
    """
    features, labels = [], []
    with torch.no_grad():
        for batch in loader:
            features.append(encode(batch["image"].to(device)))
            labels.append(batch["label"].to(device))
    return torch.cat(features), torch.cat(labels)


def gather_labelled(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """The ``features`` ``[N, D]`` and ``labels`` ``[N]`` of every rank, concatenated in
    rank order, less the rows with a negative label (the padding of a sharded test
    split, an unlabelled image): a rank's share of a split becomes the whole split.
    Every rank calls it with as many rows (the test shards are padded to the same
    size). In one process: the labelled rows of the arguments."""
    features, labels = distributed.all_gather_cat(features), distributed.all_gather_cat(labels)
    labelled = labels >= 0
    return features[labelled], labels[labelled]


class KnnMeter(Meter):
    """kNN top-1 accuracy of the backbone features of the clean test images.

    The memory bank is rebuilt by :meth:`prepare` at the start of each test phase: the
    features of the ``"memory"`` loader (the clean train split) from the model's
    ``encode`` in eval mode; :meth:`set_memory` sets one directly. :meth:`update` reads
    ``output["features"]`` and ``batch["label"]``. ``vote`` and ``temperature`` choose
    the rule (:func:`knn_predict`): a majority vote, or DINO's vote weighted by
    ``exp(similarity / temperature)``. Value: ``{"knn_top1": correct / total}`` (NaN
    before any update). The counts are the base class's, summed across ranks by
    :meth:`sync_state` whichever the vote.
    """

    name = "knn"
    count_names = ("correct", "total")
    value_names = ("knn_top1",)
    phases = ("test",)

    def __init__(self, k: int = 20, vote: KnnVote = "majority", temperature: float = 0.07) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if vote not in ("majority", "weighted"):
            raise ValueError(f"vote must be 'majority' or 'weighted', got {vote!r}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.k = k
        self.vote: KnnVote = vote
        self.temperature = temperature
        self.memory: Tensor | None = None
        self.memory_labels: Tensor | None = None
        self.num_classes = 0

    def prepare(self, model: Module, data_loaders: dict[str, Iterable], device: Device) -> None:
        """Encode the ``"memory"`` loader with ``model.encode`` and use it as memory."""
        encode = cast(Encode, model.encode)
        self.set_memory(*extract_features(encode, data_loaders["memory"], device))

    def set_memory(self, features: Tensor, labels: Tensor) -> None:
        """Use ``features`` ``[M, D]`` (stored L2-normalised) with ``labels`` ``[M]``."""
        if len(features) != len(labels) or len(features) == 0:
            raise ValueError(
                f"memory needs as many labels as features, at least one: got {len(features)} "
                f"features and {len(labels)} labels"
            )
        if int(labels.min()) < 0:
            raise ValueError(
                "the kNN memory has negative labels (images of a flat, unlabelled folder?): "
                "set meters.knn.enabled false or give the images class folders"
            )
        self.memory = F.normalize(features.detach().float(), dim=1)
        self.memory_labels = labels.to(self.memory.device, torch.long)
        self.num_classes = int(self.memory_labels.max()) + 1

    def clear_memory(self) -> None:
        """Drop the memory bank (the counts are kept)."""
        self.memory = None
        self.memory_labels = None
        self.num_classes = 0

    def update(self, output: dict, batch: dict) -> None:
        """Count the test images whose kNN prediction matches their label; an image
        with a negative label (the padding of a sharded test split) is not counted."""
        if self.memory is None or self.memory_labels is None:
            raise RuntimeError(
                "KnnMeter.update needs a memory bank: the trainer calls prepare() at the "
                "start of each test phase; outside a run, call set_memory(features, labels)"
            )
        queries = F.normalize(output["features"].detach().float(), dim=1).to(self.memory.device)
        labels = batch["label"].to(self.memory.device)
        counted = labels >= 0
        predictions = knn_predict(
            queries,
            self.memory,
            self.memory_labels,
            self.k,
            self.num_classes,
            vote=self.vote,
            temperature=self.temperature,
        )
        self.add("correct", ((predictions == labels) & counted).sum())
        self.add("total", counted.sum())

    def value(self) -> dict[str, float]:
        """``{"knn_top1": accuracy}``."""
        total = float(self.counts["total"])
        correct = float(self.counts["correct"])
        return {"knn_top1": correct / total if total else float("nan")}

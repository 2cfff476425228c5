"""Frozen-encoder evaluation: feature extraction, kNN accuracy and a few-label linear probe."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hookbus.parts.meters.knn import KnnVote, knn_predict

KNN_QUERY_CHUNK = 1024
"""Test images classified at once by :func:`knn_accuracy`, to bound the similarity matrix."""


def knn_accuracy(
    train_feats: Tensor,
    train_labels: Tensor,
    test_feats: Tensor,
    test_labels: Tensor,
    k: int = 20,
    vote: KnnVote = "majority",
    temperature: float = 0.07,
) -> float:
    """Top-1 accuracy of kNN on cosine similarity, the train features as memory.

    Same rule as :class:`hookbus.parts.meters.KnnMeter` (:func:`hookbus.parts.meters.knn_predict`),
    with the same ``vote`` and ``temperature``.
    """
    memory = F.normalize(train_feats.float(), dim=1)
    memory_labels = train_labels.to(memory.device, torch.long)
    queries = F.normalize(test_feats.float(), dim=1).to(memory.device)
    num_classes = int(memory_labels.max()) + 1
    predictions = torch.cat(
        [
            knn_predict(chunk, memory, memory_labels, k, num_classes, vote, temperature)
            for chunk in queries.split(KNN_QUERY_CHUNK)
        ]
    )
    correct = (predictions == test_labels.to(memory.device)).sum().item()
    return correct / len(test_labels)


def _normalised_numpy(features: Tensor) -> np.ndarray:
    """L2-normalised rows as a float64 numpy array on the CPU."""
    return F.normalize(features.float(), dim=1).cpu().double().numpy()


def linear_probe_accuracy(
    train_feats: Tensor,
    train_labels: Tensor,
    test_feats: Tensor,
    test_labels: Tensor,
    labels_per_class: int = 10,
    draws: int = 10,
    seed: int = 0,
) -> float:
    """Test accuracy of a logistic regression trained on a few labelled train images.

    Each of ``draws`` draws (numpy generator seeded with ``seed``) picks
    ``labels_per_class`` train images per class without replacement and fits
    ``LogisticRegression(max_iter=1000)`` on their features; the result is the mean test
    accuracy over the draws. Features are L2-normalised, then standardised with the
    mean and variance of all train features (no labels needed for that).
    """
    # scikit-learn takes about 2 s to import: only runs that evaluate a probe pay for it
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    train_x = _normalised_numpy(train_feats)
    test_x = _normalised_numpy(test_feats)
    scaler = StandardScaler().fit(train_x)
    train_x, test_x = scaler.transform(train_x), scaler.transform(test_x)
    train_y = train_labels.cpu().numpy()
    test_y = test_labels.cpu().numpy()
    by_class = [np.flatnonzero(train_y == label) for label in np.unique(train_y)]
    too_few = [len(members) for members in by_class if len(members) < labels_per_class]
    if too_few:
        raise ValueError(
            f"labels_per_class={labels_per_class} but a class has only {min(too_few)} train images"
        )
    rng = np.random.default_rng(seed)
    accuracies = []
    for _ in range(draws):
        chosen = np.concatenate(
            [rng.choice(members, labels_per_class, replace=False) for members in by_class]
        )
        probe = LogisticRegression(max_iter=1000).fit(train_x[chosen], train_y[chosen])
        accuracies.append(probe.score(test_x, test_y))
    return float(np.mean(accuracies))

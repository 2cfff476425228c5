"""Feature extraction, kNN accuracy and the few-label linear probe."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookbus import Config
from hookbus.hooks.evaluation_report import EvaluationReportHook
from hookbus.parts.meters import KnnMeter
from hookbus.parts.meters.frozen_eval import knn_accuracy, linear_probe_accuracy
from hookbus.parts.meters.knn import extract_features

MEMORY = torch.tensor([[1.0, 0.1], [1.0, 0.2], [1.0, -0.1], [0.1, 1.0], [0.2, 1.0], [-0.1, 1.0]])
MEMORY_LABELS = torch.tensor([0, 0, 0, 1, 1, 1])
QUERIES = torch.tensor([[2.0, 0.1], [0.05, 3.0], [1.0, 0.3], [0.3, 1.0]])
QUERY_LABELS = torch.tensor([0, 1, 1, 1])


def separable(count_per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """3 classes of 3-D features, each a tight cluster around its own axis."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(3).repeat_interleave(count_per_class)
    features = 0.05 * torch.randn(len(labels), 3, generator=generator)
    features[torch.arange(len(labels)), labels] += 1.0
    return features, labels


def test_extract_features_encodes_the_clean_images_in_order() -> None:
    encoder = nn.Linear(4, 3)
    images = torch.randn(5, 4)
    loader = [
        {"image": images[:3], "label": torch.tensor([0, 1, 2]), "views": []},
        {"image": images[3:], "label": torch.tensor([3, 4])},
    ]
    features, labels = extract_features(encoder, loader, "cpu")
    torch.testing.assert_close(features, encoder(images).detach())
    assert labels.tolist() == [0, 1, 2, 3, 4]
    assert not features.requires_grad


def test_knn_accuracy_on_a_hand_made_example() -> None:
    assert knn_accuracy(MEMORY, MEMORY_LABELS, QUERIES, QUERY_LABELS, k=3) == 0.75


def test_knn_accuracy_agrees_with_the_meter() -> None:
    features, labels = separable(20, seed=0)
    queries, query_labels = separable(10, seed=1)
    queries = queries + 0.5 * torch.randn(queries.shape, generator=torch.Generator().manual_seed(2))
    meter = KnnMeter(k=5)
    meter.set_memory(features, labels)
    meter.update({"features": queries}, {"label": query_labels})
    accuracy = knn_accuracy(features, labels, queries, query_labels, k=5)
    assert accuracy == meter.value()["knn_top1"]
    assert 0.5 < accuracy < 1.0


@pytest.mark.parametrize("temperature", [0.07, 0.5])
def test_weighted_knn_accuracy_agrees_with_the_weighted_meter(temperature: float) -> None:
    features, labels = separable(20, seed=0)
    queries, query_labels = separable(10, seed=1)
    queries = queries + 0.5 * torch.randn(queries.shape, generator=torch.Generator().manual_seed(2))
    meter = KnnMeter(k=5, vote="weighted", temperature=temperature)
    meter.set_memory(features, labels)
    meter.update({"features": queries}, {"label": query_labels})
    accuracy = knn_accuracy(
        features, labels, queries, query_labels, k=5, vote="weighted", temperature=temperature
    )
    assert accuracy == meter.value()["knn_top1"]


def test_the_evaluation_report_takes_the_vote_of_the_knn_meter() -> None:
    cfg = Config()
    cfg.meters.knn.vote = "weighted"
    cfg.meters.knn.temperature = 0.2
    hook = EvaluationReportHook.from_config(cfg)
    assert (hook.vote, hook.temperature, hook.k) == ("weighted", 0.2, cfg.meters.knn.k)


def test_knn_accuracy_over_several_query_chunks() -> None:
    queries = QUERIES.repeat(700, 1)  # 2800 queries: three chunks
    labels = QUERY_LABELS.repeat(700)
    assert knn_accuracy(MEMORY, MEMORY_LABELS, queries, labels, k=3) == 0.75


def test_linear_probe_separates_separable_features() -> None:
    train = separable(30, seed=0)
    test = separable(10, seed=1)
    assert linear_probe_accuracy(*train, *test, labels_per_class=5, draws=3) == 1.0


@pytest.mark.slow
def test_linear_probe_is_fixed_by_its_seed() -> None:
    train = separable(30, seed=0)
    features, labels = separable(10, seed=1)
    noise = torch.randn(features.shape, generator=torch.Generator().manual_seed(2))
    test = (features + 0.6 * noise, labels)
    first = linear_probe_accuracy(*train, *test, labels_per_class=1, draws=4, seed=3)
    again = linear_probe_accuracy(*train, *test, labels_per_class=1, draws=4, seed=3)
    assert first == again
    assert 0.4 < first < 1.0


def test_linear_probe_needs_enough_labels_per_class() -> None:
    train = separable(5, seed=0)
    with pytest.raises(ValueError, match="only 5"):
        linear_probe_accuracy(*train, *separable(2, seed=1), labels_per_class=6)

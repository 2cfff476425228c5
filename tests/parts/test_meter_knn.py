"""KnnMeter: the kNN rule on hand-made 2-D features, counts, state and building."""

from __future__ import annotations

import math

import pytest
import torch

from hookbus import METERS, Config
from hookbus.parts.meters import KnnMeter, build_meters, knn_predict

MEMORY = torch.tensor([[1.0, 0.1], [1.0, 0.2], [1.0, -0.1], [0.1, 1.0], [0.2, 1.0], [-0.1, 1.0]])
MEMORY_LABELS = torch.tensor([0, 0, 0, 1, 1, 1])
QUERIES = torch.tensor([[2.0, 0.1], [0.05, 3.0], [1.0, 0.3], [0.3, 1.0]])
QUERY_LABELS = torch.tensor([0, 1, 1, 1])  # the third lies among class 0: wrong


def meter(k: int = 3) -> KnnMeter:
    knn = KnnMeter(k=k)
    knn.set_memory(MEMORY, MEMORY_LABELS)
    return knn


def update(knn: KnnMeter, queries: torch.Tensor, labels: torch.Tensor) -> None:
    knn.update({"features": queries}, {"label": labels})


def test_accuracy_on_a_hand_made_example() -> None:
    knn = meter()
    update(knn, QUERIES, QUERY_LABELS)
    assert knn.value() == {"knn_top1": 0.75}


def test_counts_accumulate_over_updates_as_tensors() -> None:
    knn = meter()
    update(knn, QUERIES[:2], QUERY_LABELS[:2])
    update(knn, QUERIES[2:], QUERY_LABELS[2:])
    assert isinstance(knn.counts["correct"], torch.Tensor)
    assert (knn.counts["correct"].item(), knn.counts["total"].item()) == (3.0, 4.0)


def test_a_tie_goes_to_the_smallest_class() -> None:
    memory = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=1)
    query = torch.nn.functional.normalize(torch.tensor([[1.0, 1.0]]), dim=1)
    predicted = knn_predict(query, memory, torch.tensor([2, 1]), k=2, num_classes=3)
    assert predicted.tolist() == [1]


def test_k_larger_than_the_memory_uses_all_of_it() -> None:
    knn = meter(k=50)
    update(knn, QUERIES, torch.zeros(4, dtype=torch.long))  # 3 vs 3 votes: class 0
    assert knn.value() == {"knn_top1": 1.0}


def test_update_without_memory_raises() -> None:
    with pytest.raises(RuntimeError, match="set_memory"):
        update(KnnMeter(), QUERIES, QUERY_LABELS)


def test_reset_clears_counts_but_keeps_memory() -> None:
    knn = meter()
    update(knn, QUERIES, QUERY_LABELS)
    knn.reset()
    assert math.isnan(knn.value()["knn_top1"])
    update(knn, QUERIES[:1], QUERY_LABELS[:1])
    assert knn.value() == {"knn_top1": 1.0}


def test_clear_memory_drops_it() -> None:
    knn = meter()
    knn.clear_memory()
    with pytest.raises(RuntimeError):
        update(knn, QUERIES, QUERY_LABELS)


def test_sync_state_is_a_no_op_in_one_process() -> None:
    knn = meter()
    update(knn, QUERIES, QUERY_LABELS)
    knn.sync_state()
    assert knn.value() == {"knn_top1": 0.75}


def test_state_dict_round_trip() -> None:
    knn = meter()
    update(knn, QUERIES, QUERY_LABELS)
    restored = meter()
    restored.load_state_dict(knn.state_dict())
    update(restored, QUERIES[:1], QUERY_LABELS[:1])
    assert restored.value() == {"knn_top1": 0.8}


def test_meter_declares_its_phases_and_memory_need() -> None:
    assert (KnnMeter.name, KnnMeter.phases) == ("knn", ("test",))


# Two class-0 rows right beside the query, three class-1 rows further off.
NEAR_FEW = torch.tensor([[1.0, 0.0], [1.0, 0.05], [1.0, 1.0], [1.0, 0.9], [1.0, 1.1]])
NEAR_FEW_LABELS = torch.tensor([0, 0, 1, 1, 1])


def normalised(features: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(features, dim=1)


def test_majority_and_weighted_votes_disagree_when_the_few_are_much_nearer() -> None:
    memory, query = normalised(NEAR_FEW), normalised(torch.tensor([[1.0, 0.0]]))
    majority = knn_predict(query, memory, NEAR_FEW_LABELS, k=5, num_classes=2)
    weighted = knn_predict(
        query, memory, NEAR_FEW_LABELS, k=5, num_classes=2, vote="weighted", temperature=0.07
    )
    assert (majority.tolist(), weighted.tolist()) == ([1], [0])


def test_weighted_vote_matches_a_direct_recomputation() -> None:
    generator = torch.Generator().manual_seed(0)
    memory = normalised(torch.randn(40, 6, generator=generator))
    labels = torch.randint(0, 5, (40,), generator=generator)
    queries = normalised(torch.randn(30, 6, generator=generator))
    k, temperature = 7, 0.1
    expected = []
    for query in queries:
        similarities = [float(query @ row) for row in memory]
        nearest = sorted(range(40), key=lambda i: similarities[i], reverse=True)[:k]
        scores = [0.0] * 5
        for i in nearest:
            scores[int(labels[i])] += math.exp(similarities[i] / temperature)
        expected.append(max(range(5), key=lambda c: (scores[c], -c)))
    predicted = knn_predict(
        queries, memory, labels, k=k, num_classes=5, vote="weighted", temperature=temperature
    )
    assert predicted.tolist() == expected


def test_weighted_meter_counts_and_syncs_like_the_majority_one() -> None:
    knn = KnnMeter(k=5, vote="weighted", temperature=0.07)
    knn.set_memory(NEAR_FEW, NEAR_FEW_LABELS)
    update(knn, torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([0, 1]))
    knn.sync_state()
    assert knn.value() == {"knn_top1": 1.0}
    assert (knn.counts["correct"].item(), knn.counts["total"].item()) == (2.0, 2.0)
    majority = KnnMeter(k=5)
    majority.set_memory(NEAR_FEW, NEAR_FEW_LABELS)
    update(majority, torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([0, 1]))
    assert majority.value() == {"knn_top1": 0.5}


def test_meter_rejects_an_unknown_vote_and_a_non_positive_temperature() -> None:
    with pytest.raises(ValueError, match="vote"):
        KnnMeter(vote="soft")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="temperature"):
        KnnMeter(vote="weighted", temperature=0.0)


def test_build_meters_follows_the_config() -> None:
    built = build_meters(Config.model_validate({"meters": {"knn": {"k": 7}}}))
    assert [type(m) for m in built] == [KnnMeter]
    assert (built[0].k, built[0].vote, built[0].temperature) == (7, "majority", 0.07)
    weighted = build_meters(
        Config.model_validate({"meters": {"knn": {"vote": "weighted", "temperature": 0.2}}})
    )
    assert (weighted[0].vote, weighted[0].temperature) == ("weighted", 0.2)
    assert build_meters(Config.model_validate({"meters": {"knn": {"enabled": False}}})) == []
    assert METERS.names() == ["accuracy", "collapse", "knn"]

"""The scores of ``hookbus eval`` against scikit-learn on the same features: kNN with the
weighted vote, the linear probe at convergence, retrieval mAP and recall@k; the low-shot
splits reproducible by seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

from hookbus.eval import EvalSettings, score
from hookbus.eval_features import SplitFeatures
from hookbus.eval_probe import (
    ProbeSettings,
    linear_probe,
    low_shot,
    low_shot_indices,
    probe_predictions,
    standardise,
    train_probe_draws,
    train_probes,
)
from hookbus.eval_retrieval import retrieval
from hookbus.parts.meters.frozen_eval import knn_accuracy


def clusters(count: int, classes: int, dims: int, seed: int, noise: float = 0.9):
    """``count`` features of ``classes`` overlapping Gaussian clusters, and labels."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dims, generator=torch.Generator().manual_seed(99))
    labels = torch.arange(count) % classes
    features = centres[labels] + noise * torch.randn(count, dims, generator=generator)
    return features, labels


TRAIN = clusters(300, 5, 12, seed=0)
TEST = clusters(120, 5, 12, seed=1)


@pytest.mark.parametrize("k", [1, 10, 20, 200])
@pytest.mark.parametrize("temperature", [0.07, 0.5])
def test_weighted_knn_equals_scikit_learn(k: int, temperature: float) -> None:
    """DINO's vote, exp(similarity / T), is scikit-learn's kNN on the cosine distance with
    the weights exp((1 - distance) / T)."""
    ours = knn_accuracy(*TRAIN, *TEST, k=k, vote="weighted", temperature=temperature)
    reference = KNeighborsClassifier(
        n_neighbors=k,
        metric="cosine",
        algorithm="brute",
        weights=lambda distances: np.exp((1 - distances) / temperature),
    ).fit(TRAIN[0].numpy(), TRAIN[1].numpy())
    assert ours == reference.score(TEST[0].numpy(), TEST[1].numpy())
    assert 0.3 < ours < 1.0


def test_the_probe_converges_to_scikit_learns_logistic_regression() -> None:
    """Trained long enough, each probe of the grid reaches the optimum of its objective,
    mean cross-entropy + wd / 2 |W|^2: scikit-learn's multinomial LogisticRegression
    with C = 1 / (n wd), on the same standardised features. Weights and predictions
    agree."""
    train_x, test_x = standardise(TRAIN[0], TEST[0])
    settings = ProbeSettings(epochs=400, batch_size=1000, momentum=0.9)
    grid = [(0.5, 0.01), (0.5, 0.05)]
    weights, bias = train_probes(train_x, TRAIN[1], 5, grid, settings, seed=0)
    predicted = probe_predictions(weights, bias, test_x)
    for index, (_, wd) in enumerate(grid):
        reference = LogisticRegression(C=1 / (len(train_x) * wd), tol=1e-10, max_iter=10_000)
        reference.fit(train_x.numpy(), TRAIN[1].numpy())
        np.testing.assert_allclose(
            weights[index].T.numpy() - weights[index].T.numpy().mean(axis=0),
            reference.coef_ - reference.coef_.mean(axis=0),
            atol=2e-3,
        )
        assert predicted[index].tolist() == reference.predict(test_x.numpy()).tolist()
        ours = float((predicted[index] == TEST[1]).double().mean())
        assert ours == reference.score(test_x.numpy(), TEST[1].numpy())


def test_the_linear_probe_picks_the_best_held_out_point_and_retrains_on_all_of_train() -> None:
    settings = ProbeSettings(lrs=(0.001, 0.1), weight_decays=(0.0, 0.01), epochs=30)
    found = linear_probe(TRAIN, TEST, settings, seed=3)
    scores = [point.held_out_top1 for point in found.grid]
    best = found.grid[int(np.argmax(scores))]
    assert (found.lr, found.weight_decay) == (best.lr, best.weight_decay)
    assert [(p.lr, p.weight_decay) for p in found.grid] == settings.grid()
    assert found.held_out_images == 30  # 10% of each class's 60 images
    train_x, test_x = standardise(*TRAIN[:1], TEST[0])
    weights, bias = train_probes(
        train_x, TRAIN[1], 5, [(found.lr, found.weight_decay)], settings, seed=3
    )
    expected = float((probe_predictions(weights, bias, test_x)[0] == TEST[1]).double().mean())
    assert found.top1 == expected
    assert linear_probe(TRAIN, TEST, settings, seed=3) == found


def test_low_shot_draws_are_reproducible_by_seed_and_stratified() -> None:
    labels = TRAIN[1]
    first = low_shot_indices(labels, 0.1, seed=0, draw=0)
    assert first.tolist() == low_shot_indices(labels, 0.1, seed=0, draw=0).tolist()
    assert first.tolist() != low_shot_indices(labels, 0.1, seed=0, draw=1).tolist()
    assert first.tolist() != low_shot_indices(labels, 0.1, seed=1, draw=0).tolist()
    assert np.bincount(labels[first].numpy()).tolist() == [6] * 5
    one = low_shot_indices(labels, 0.01, seed=0, draw=0)
    assert np.bincount(labels[one].numpy()).tolist() == [1] * 5  # at least one per class
    settings = ProbeSettings(epochs=20)
    result = low_shot(TRAIN, TEST, 0.1, 3, (0.1, 0.0), settings, seed=0)
    again = low_shot(TRAIN, TEST, 0.1, 3, (0.1, 0.0), settings, seed=0)
    assert result == again
    assert result.images == [30, 30, 30]
    assert result.mean == pytest.approx(np.mean(result.top1))
    assert result.std == pytest.approx(np.std(result.top1))
    assert result.spread == max(result.top1) - min(result.top1)


@pytest.mark.parametrize("batch_size", [256, 16])
def test_draws_trained_side_by_side_equal_each_draw_trained_alone(batch_size: int) -> None:
    settings = ProbeSettings(epochs=25, batch_size=batch_size)
    chosen = [torch.from_numpy(low_shot_indices(TRAIN[1], 0.1, seed=0, draw=d)) for d in range(3)]
    xs = torch.stack([standardise(TRAIN[0][indices])[0] for indices in chosen])
    ys = torch.stack([TRAIN[1][indices] for indices in chosen])
    weights, bias = train_probe_draws(xs, ys, 5, (0.1, 1e-3), settings, seeds=[4, 5, 6])
    assert weights.shape == (3, 12, 5) and bias.shape == (3, 5)
    for draw in range(3):
        alone_w, alone_b = train_probes(xs[draw], ys[draw], 5, [(0.1, 1e-3)], settings, 4 + draw)
        torch.testing.assert_close(weights[draw], alone_w[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(bias[draw], alone_b[0], atol=1e-5, rtol=1e-5)
        test_x = standardise(TRAIN[0][chosen[draw]], TEST[0])[1]
        assert torch.equal(
            probe_predictions(weights[draw : draw + 1], bias[draw : draw + 1], test_x),
            probe_predictions(alone_w, alone_b, test_x),
        )


def test_retrieval_equals_scikit_learn_average_precision_and_neighbours() -> None:
    ks = (1, 5, 10)
    found = retrieval(TRAIN, TEST, ks)
    memory = torch.nn.functional.normalize(TRAIN[0], dim=1)
    queries = torch.nn.functional.normalize(TEST[0], dim=1)
    similarity = (queries @ memory.T).numpy()
    relevant = TEST[1].numpy()[:, None] == TRAIN[1].numpy()[None, :]
    expected = np.mean(
        [average_precision_score(relevant[q], similarity[q]) for q in range(len(queries))]
    )
    assert found.mean_average_precision == pytest.approx(expected, abs=1e-12)
    neighbours = NearestNeighbors(metric="cosine", algorithm="brute").fit(TRAIN[0].numpy())
    _, nearest = neighbours.kneighbors(TEST[0].numpy(), n_neighbors=10)
    for k in ks:
        hit = (TRAIN[1].numpy()[nearest[:, :k]] == TEST[1].numpy()[:, None]).any(axis=1)
        assert found.recall_at[k] == hit.mean()


def test_retrieval_leaves_out_queries_of_a_class_the_database_lacks() -> None:
    database = (torch.eye(3)[:2], torch.tensor([0, 1]))
    queries = (torch.eye(3), torch.tensor([0, 1, 2]))
    found = retrieval(database, queries, (1,))
    assert found.mean_average_precision == 1.0
    assert found.recall_at[1] == pytest.approx(2 / 3)


def test_each_part_can_be_switched_off() -> None:
    splits = {
        "train": SplitFeatures({"backbone": TRAIN[0]}, TRAIN[1]),
        "test": SplitFeatures({"backbone": TEST[0]}, TEST[1]),
    }
    quick = ProbeSettings(epochs=5)
    everything = score(splits, EvalSettings(probe=quick), {})
    assert set(everything) == {"knn", "linear", "low_shot", "retrieval"}
    assert list(everything["knn"]["backbone"]) == ["10", "20", "200"]
    seconds: dict[str, float] = {}
    nothing = EvalSettings(knn_k=(), linear=False, low_shot=(), retrieval_k=())
    assert score(splits, nothing, seconds) == {}
    assert seconds == {}
    only_knn = score(splits, EvalSettings(linear=False, low_shot=(), retrieval_k=()), {})
    assert only_knn["knn"] == everything["knn"]

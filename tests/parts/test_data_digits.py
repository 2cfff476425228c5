"""The digits split: sizes, stratification, resizing, normalisation, registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from hookbus import DATASETS
from hookbus.engine.config import DataConfig
from hookbus.parts.data import ImageSplit, TensorImageDataset, load_digits_split


@pytest.fixture(scope="module")
def split() -> ImageSplit:
    return load_digits_split()


def test_split_sizes_shapes_and_dtypes(split: ImageSplit) -> None:
    assert split.train_images.shape == (1297, 1, 16, 16)
    assert split.test_images.shape == (500, 1, 16, 16)
    assert split.train_labels.shape == (1297,)
    assert split.test_labels.shape == (500,)
    assert split.train_images.dtype == torch.float32
    assert split.train_labels.dtype == torch.int64


def test_train_split_is_standardised(split: ImageSplit) -> None:
    assert split.train_images.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert split.train_images.std().item() == pytest.approx(1.0, abs=1e-5)


def test_both_splits_are_normalised_with_train_statistics() -> None:
    digits = load_digits()
    train_x, test_x, _, _ = train_test_split(
        digits.images / 16.0, digits.target, test_size=500, random_state=0, stratify=digits.target
    )
    mean, std = train_x.mean(), train_x.std(ddof=1)
    expected = torch.from_numpy(((test_x - mean) / std).astype(np.float32)).unsqueeze(1)
    at_8x8 = load_digits_split(image_size=8)  # an 8x8 resize is the identity
    torch.testing.assert_close(at_8x8.test_images, expected, atol=1e-5, rtol=0)


def test_split_is_stratified(split: ImageSplit) -> None:
    overall = np.bincount(load_digits().target, minlength=10)
    expected = 500 * overall / overall.sum()
    counts = torch.bincount(split.test_labels, minlength=10).numpy()
    assert counts.sum() == 500
    assert np.abs(counts - expected).max() < 1.0


def test_split_is_fixed_by_the_seed() -> None:
    first, again = load_digits_split(image_size=8), load_digits_split(image_size=8)
    assert torch.equal(first.test_labels, again.test_labels)
    assert torch.equal(first.test_images, again.test_images)


def test_registered_digits_builder_returns_indexed_datasets() -> None:
    train, test = DATASETS.get("digits")(DataConfig(image_size=12, test_size=300))
    assert isinstance(train, TensorImageDataset)
    assert (len(train), len(test)) == (1497, 300)
    image, label, index = train[7]
    assert image.shape == (1, 12, 12)
    assert int(label) == int(train.labels[7])
    assert index == 7

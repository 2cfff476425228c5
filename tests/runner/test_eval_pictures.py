"""The pictures of ``hookbus eval --pictures`` on real photographs: one t-SNE point per
test image, the nearest-neighbour grid of the right train images, and the projector's
embedding (features, class names, thumbnails) and each picture in TensorBoard."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from sklearn.neighbors import NearestNeighbors
from tensorboardX.proto.event_pb2 import Event

from hookbus.cli import main
from hookbus.config import load_config
from hookbus.eval_data import labelled_data
from hookbus.eval_features import SplitFeatures
from hookbus.pictures import (
    CELL,
    _cell,
    embedding_map,
    map_indices,
    nearest_train,
    neighbour_grid,
    split_images,
)
from tests.eval_runs import photo_settings, write_run
from tests.photos import make_photo_folder


@pytest.fixture(scope="module")
def photo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on 10 + 10 photographs per class (24 px), evaluated with its pictures."""
    root = tmp_path_factory.mktemp("pictures")
    folder = make_photo_folder(root / "photos", per_class=10, size=24)
    run_dir = root / "run"
    write_run(run_dir, photo_settings(folder, size=24))
    assert main(["eval", str(run_dir), "--pictures", "-q"]) == 0
    assert main(["eval", str(run_dir), "--pictures", "-q"]) == 0  # the pictures replaced
    return run_dir


def cached(run_dir: Path) -> dict[str, SplitFeatures]:
    (path,) = (run_dir / "eval_cache").iterdir()
    saved = torch.load(path, weights_only=True)
    return {
        name: SplitFeatures(saved[name]["features"], saved[name]["labels"])
        for name in ("train", "test")
    }


def tensorboard_events(run_dir: Path) -> list[Event]:
    events = []
    for path in sorted((run_dir / "tensorboard" / "eval").glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            events.append(Event.FromString(data[offset + 12 : offset + 12 + length]))
            offset += 12 + length + 4
    return events


def test_the_results_list_each_picture_and_each_is_a_png(photo_run: Path) -> None:
    pictures = json.loads((photo_run / "eval.json").read_text())["pictures"]
    assert pictures["tsne"] == "pictures/tsne.png"
    assert pictures["neighbours"] == "pictures/neighbours.png"
    assert pictures["not_drawn"] == {
        "attention": "the backbone is not a ViT",
        "patch_pca": "the backbone is not a ViT",
    }
    with Image.open(photo_run / pictures["neighbours"]) as grid:
        assert grid.size == (7 * (CELL + 4), 8 * (CELL + 4))  # 8 queries, 6 neighbours
    with Image.open(photo_run / pictures["tsne"]) as tsne:
        assert tsne.size == (640, 560)


def test_the_map_has_one_finite_point_per_test_image(photo_run: Path) -> None:
    test = cached(photo_run)["test"]
    found = embedding_map(test, seed=0)
    assert found.points.shape == (20, 2)
    assert np.isfinite(found.points).all()
    assert found.indices.tolist() == list(range(20))
    assert found.labels.tolist() == test.labels.tolist()
    assert len(np.unique(found.points, axis=0)) == 20
    many = map_indices(3000, seed=4, most=1000)
    assert len(np.unique(many)) == 1000 and many.tolist() == sorted(many.tolist())
    assert many.tolist() == map_indices(3000, seed=4, most=1000).tolist()


def test_the_grid_shows_each_querys_nearest_train_images(photo_run: Path) -> None:
    splits = cached(photo_run)
    train, test = splits["train"], splits["test"]
    queries = np.array([0, 3, 17])
    nearest = nearest_train(train, test, queries, k=4)
    reference = NearestNeighbors(metric="cosine", algorithm="brute")
    reference.fit(train.features["backbone"].numpy())
    expected = reference.kneighbors(test.features["backbone"][queries].numpy(), 4)[1]
    assert nearest.tolist() == expected.tolist()
    data = labelled_data(load_config(photo_run / "config.yaml"), None)
    shown = data.shown(split_images(data, "test", queries))
    neighbours = data.shown(split_images(data, "train", nearest.reshape(-1))).view(3, 4, 3, 24, 24)
    same = train.labels.numpy()[nearest] == test.labels.numpy()[queries][:, None]
    grid = neighbour_grid(shown, neighbours, same)
    side = CELL + 4
    assert grid.shape == (3 * side, 5 * side, 3)
    for row in range(3):
        assert (
            grid[row * side + 2 : row * side + 2 + CELL, 2 : 2 + CELL] == _cell(shown[row], CELL)
        ).all()
        for column in range(4):
            top, left = row * side, (1 + column) * side
            cell = grid[top + 2 : top + 2 + CELL, left + 2 : left + 2 + CELL]
            assert (cell == _cell(neighbours[row, column], CELL)).all()
            frame = tuple(grid[top, left])
            assert frame == ((40, 160, 40) if same[row, column] else (210, 40, 40))


def test_tensorboard_holds_each_picture_and_the_projectors_embedding(photo_run: Path) -> None:
    images = {
        value.tag: value.image
        for event in tensorboard_events(photo_run)
        for value in event.summary.value
        if value.HasField("image")
    }
    assert set(images) == {"eval/tsne", "eval/neighbours"}
    for tag, name in (("eval/tsne", "tsne"), ("eval/neighbours", "neighbours")):
        with Image.open(photo_run / "pictures" / f"{name}.png") as picture:
            assert (images[tag].width, images[tag].height) == picture.size
    config = (photo_run / "tensorboard" / "eval" / "projector_config.pbtxt").read_text()
    assert config.count("embeddings {") == 1  # one after two evaluations
    assert 'tensor_path: "00000/eval_backbone/tensors.tsv"' in config
    projector = photo_run / "tensorboard" / "eval" / "00000" / "eval_backbone"
    test = cached(photo_run)["test"]
    names = [("china", "flower")[label] for label in test.labels.tolist()]
    assert (projector / "metadata.tsv").read_text().splitlines() == names
    rows = np.loadtxt(projector / "tensors.tsv", delimiter="\t")
    np.testing.assert_allclose(rows, test.features["backbone"].numpy(), rtol=1e-5, atol=1e-6)
    with Image.open(io.BytesIO((projector / "sprite.png").read_bytes())) as sprite:
        assert sprite.size == (5 * 32, 5 * 32)  # 20 thumbnails of 32 px on a 5 x 5 grid
        pixels = np.array(sprite)
    assert (pixels[4 * 32 :] == 255).all()  # the fifth row holds no thumbnail
    data = labelled_data(load_config(photo_run / "config.yaml"), None)
    first = data.shown(split_images(data, "test", np.array([0])))
    small = torch.nn.functional.interpolate(first, size=(32, 32), mode="bilinear", antialias=True)
    expected = (small[0].clamp(0, 1) * 255).permute(1, 2, 0).numpy()
    assert np.abs(pixels[:32, :32].astype(float) - expected).max() <= 1

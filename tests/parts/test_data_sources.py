"""The synthetic and image-folder data sets, multi-crop views and the torchvision pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from hookbus import DATASETS, DataError
from hookbus.config import validate_config
from hookbus.parts.data import ImageFolderDataset, TransformCollate, build_data_loaders
from hookbus.parts.models import MLPHead, SmallCNN, SSLModel


def write_images(folder: Path, count: int, size: tuple[int, int] = (20, 14), value: int = 0):
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        pixels = Image.new("RGB", size, (value + index, 100, 200))
        pixels.save(folder / f"img{index}.png")


def folder_config(
    train: Path, test: Path | None = None, labels: str = "class_folders", **data: object
):
    return validate_config(
        {
            "data": {
                "name": "image_folder",
                "pipeline": "torchvision",
                "image_size": 16,
                "batch_size": 4,
                "test_batch_size": 4,
                "folder": {
                    "train_dir": str(train),
                    "test_dir": None if test is None else str(test),
                    "labels": labels,
                },
                **data,
            }
        }
    )


def test_synthetic_images_are_fixed_normalised_and_labelled_in_turn() -> None:
    cfg = validate_config(
        {"data": {"name": "synthetic", "image_size": 12, "synthetic": {"train_size": 10}}}
    )
    train, test = DATASETS.get("synthetic")(cfg.data)
    again, _ = DATASETS.get("synthetic")(cfg.data)
    assert train.images.shape == (10, 3, 12, 12)
    assert len(test) == 64
    assert train.labels.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert torch.equal(train.images, again.images)
    assert abs(float(train.images.mean())) < 1e-5


def test_class_folders_give_sorted_classes_and_labels(tmp_path: Path) -> None:
    write_images(tmp_path / "cat", 2)
    write_images(tmp_path / "ant", 3)
    dataset = ImageFolderDataset(tmp_path, labels="class_folders")
    assert dataset.classes == ["ant", "cat"]
    assert [label for _, label in dataset.samples] == [0, 0, 0, 1, 1]
    image, label, index = dataset[3]
    assert image.dtype == torch.uint8
    assert image.shape == (3, 14, 20)
    assert (label, index) == (1, 3)


def test_a_flat_folder_is_unlabelled(tmp_path: Path) -> None:
    write_images(tmp_path, 3)
    (tmp_path / "notes.txt").write_text("not an image")
    dataset = ImageFolderDataset(tmp_path)
    assert len(dataset) == 3
    assert {label for _, label in dataset.samples} == {-1}


def test_an_unreadable_image_is_named(tmp_path: Path) -> None:
    write_images(tmp_path / "a", 1)
    (tmp_path / "a" / "broken.jpg").write_bytes(b"not a jpeg")
    dataset = ImageFolderDataset(tmp_path)
    with pytest.raises(DataError, match=r"cannot read image .*broken\.jpg"):
        [dataset[i] for i in range(len(dataset))]


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "image folder not found"),
        ("empty", "no images in"),
        ("mixed", "holds images beside its class folders"),
    ],
)
def test_bad_folders_are_refused_with_a_clear_message(
    tmp_path: Path, layout: str, message: str
) -> None:
    root = tmp_path / "root"
    if layout != "missing":
        root.mkdir()
    if layout == "mixed":
        write_images(root, 1)
        write_images(root / "class", 1)
    with pytest.raises(DataError, match=message):
        ImageFolderDataset(root, labels="class_folders")


def test_a_test_folder_takes_the_train_classes(tmp_path: Path) -> None:
    write_images(tmp_path / "train" / "a", 1)
    write_images(tmp_path / "train" / "b", 1)
    write_images(tmp_path / "test" / "b", 2)
    write_images(tmp_path / "test" / "z", 1)
    cfg = folder_config(tmp_path / "train", tmp_path / "test")
    with pytest.raises(DataError, match="not a class of the train folder"):
        DATASETS.get("image_folder")(cfg.data)


def test_image_folder_needs_an_image_pipeline() -> None:
    with pytest.raises(ValueError, match="data.pipeline: crop_first or torchvision"):
        validate_config({"data": {"name": "image_folder"}})


@pytest.mark.slow
def test_folder_loaders_give_multi_crop_views_and_clean_images(tmp_path: Path) -> None:
    write_images(tmp_path / "a", 3, size=(30, 20))
    write_images(tmp_path / "b", 3, size=(18, 25))
    cfg = folder_config(tmp_path, small_views={"count": 2, "size": 8})
    loaders = build_data_loaders(cfg)
    train = next(iter(loaders["train"]))
    assert [tuple(view.shape) for view in train["views"]] == [(4, 3, 16, 16)] * 2 + [
        (4, 3, 8, 8)
    ] * 2
    assert "image" not in train
    test = next(iter(loaders["test"]))
    assert test["image"].shape == (4, 3, 16, 16)
    assert test["label"].tolist() == [0, 0, 0, 1]


def test_transform_collate_is_reproducible_and_leaves_the_global_rng(tmp_path: Path) -> None:
    write_images(tmp_path, 4)
    dataset = ImageFolderDataset(tmp_path)
    cfg = folder_config(tmp_path, labels="none")
    collate = build_data_loaders(cfg)["train"].collate_fn
    assert isinstance(collate, TransformCollate)
    samples = [dataset[i] for i in range(4)]
    torch.manual_seed(5)
    first = collate(samples)
    state_after = torch.get_rng_state()
    torch.manual_seed(5)
    second = collate(samples)
    assert all(torch.equal(a, b) for a, b in zip(first["views"], second["views"], strict=True))
    assert not torch.equal(first["views"][0], first["views"][1])
    torch.manual_seed(5)
    assert torch.equal(torch.get_rng_state(), state_after)


def test_batch_pipeline_makes_small_views_of_their_size() -> None:
    cfg = validate_config(
        {
            "data": {
                "name": "synthetic",
                "image_size": 16,
                "batch_size": 8,
                "small_views": {"count": 3, "size": 6},
            }
        }
    )
    batch = next(iter(build_data_loaders(cfg)["train"]))
    assert [view.shape[-1] for view in batch["views"]] == [16, 16, 6, 6, 6]


def test_model_encodes_each_size_group_once() -> None:
    torch.manual_seed(0)
    model = SSLModel(SmallCNN(width=2), MLPHead([8, 8, 4], batch_norm=False)).eval()
    calls: list[tuple[int, ...]] = []
    model.backbone.register_forward_hook(lambda _m, inputs, _o: calls.append(inputs[0].shape))
    views = [torch.randn(3, 1, 12, 12)] * 2 + [torch.randn(3, 1, 6, 6)] * 3
    output = model({"views": views})
    assert [tuple(shape) for shape in calls] == [(6, 1, 12, 12), (9, 1, 6, 6)]
    assert [e.shape for e in output["embeddings"]] == [(3, 4)] * 5
    for view, features in zip(views, output["view_features"], strict=True):
        torch.testing.assert_close(features, model.backbone(view), atol=1e-6, rtol=1e-5)

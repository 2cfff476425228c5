"""The classes of an evaluation are the data's, and every test image counts once.

Linear evaluation, fine-tuning and the online probe are refused at validation when their
``num_classes`` is not the number of classes of the train data (an image folder's class
folders), or when an SSL recipe's extra views are left in. A test split sharded over
ranks is padded with items labelled -100 that no meter, probe or loss counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus import load_config
from hookbus.cli import main
from hookbus.parts.data.build import PADDING_LABEL, PaddedSplit, build_data_loaders, num_workers
from hookbus.parts.data.datasets import TensorImageDataset
from hookbus.parts.losses.cross_entropy import ClassificationLoss
from hookbus.parts.meters.accuracy import AccuracyMeter
from hookbus.parts.meters.knn import KnnMeter, gather_labelled
from hookbus.parts.task import data_classes
from tests.photos import make_photo_folder

ROOT = Path(__file__).resolve().parents[2]
LINEAR_EVAL = str(ROOT / "configs" / "linear_eval_imagefolder_resnet18_small.yaml")
FINE_TUNE = str(ROOT / "configs" / "fine_tune_digits.yaml")
SIMCLR = str(ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml")
SMALL = [
    "model.backbone.name=small_cnn",
    "model.backbone.width=4",
    "data.image_size=16",
    "data.batch_size=4",
    "data.num_workers=0",
]


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=3, size=24)


def _folder(photos: Path) -> list[str]:
    return [f"data.folder.train_dir={photos / 'train'}", f"data.folder.test_dir={photos / 'test'}"]


def _validate(capsys: pytest.CaptureFixture[str], recipe: str, *overrides: str) -> tuple[int, str]:
    status = main(["validate", recipe, *overrides, "-q"])
    return status, capsys.readouterr().err.strip()


def test_linear_eval_with_the_folders_classes_is_valid(
    photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = (*_folder(photos), *SMALL, "model.linear_eval.checkpoint=null")
    assert _validate(capsys, LINEAR_EVAL, *overrides) == (0, "")


@pytest.mark.parametrize("classes", [10, 3])
def test_linear_eval_with_other_classes_than_the_folder_is_refused_naming_both(
    photos: Path, capsys: pytest.CaptureFixture[str], classes: int
) -> None:
    overrides = (
        *_folder(photos),
        *SMALL,
        "model.linear_eval.checkpoint=null",
        f"model.linear_eval.num_classes={classes}",
    )
    status, err = _validate(capsys, LINEAR_EVAL, *overrides)
    assert status == 2
    assert err == (
        f"hookbus validate: error: model.linear_eval.num_classes is {classes}, but the "
        "image_folder train data has 2 classes: set model.linear_eval.num_classes=2"
    )


def test_fine_tuning_with_more_classes_than_the_labels_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, err = _validate(capsys, FINE_TUNE, "model.fine_tune.num_classes=12")
    assert status == 2
    assert "model.fine_tune.num_classes is 12, but the digits train data has 10 classes" in err


def test_an_online_probe_of_other_classes_than_the_folder_is_refused(
    photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = ("hooks.online_probe.enabled=true", "hooks.online_probe.num_classes=10")
    status, err = _validate(
        capsys, SIMCLR, *_folder(photos), *SMALL, "model.head.dims=[16,8]", *probe
    )
    assert status == 2
    assert "hooks.online_probe.num_classes is 10, but the image_folder train data has 2" in err


def test_linear_eval_on_a_flat_folder_is_refused_for_want_of_labels(
    photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = photos / "train" / "china"
    overrides = (
        f"data.folder.train_dir={flat}",
        f"data.folder.test_dir={flat}",
        *SMALL,
        "data.batch_size=2",
        "model.linear_eval.checkpoint=null",
    )
    status, err = _validate(capsys, LINEAR_EVAL, *overrides)
    assert status == 2
    assert f"{flat} holds no class folders, so its images have no labels" in err
    unlabelled = ("data.folder.labels=none", "meters.knn.enabled=false")
    status, err = _validate(capsys, LINEAR_EVAL, *overrides, *unlabelled)
    assert status == 2
    assert "model.linear_eval needs labelled images" in err


@pytest.mark.parametrize("views", ["data.num_views=2", "data.small_views.count=2"])
def test_linear_eval_with_an_ssl_recipes_views_is_refused(
    capsys: pytest.CaptureFixture[str], views: str
) -> None:
    status, err = _validate(capsys, FINE_TUNE.replace("fine_tune", "linear_eval"), views)
    assert status == 2
    assert "model.linear_eval.enabled trains the classifier on one view of each image" in err


def test_data_classes_counts_class_folders_else_labels(photos: Path) -> None:
    cfg = load_config(LINEAR_EVAL, [*_folder(photos), *SMALL])
    loaders = build_data_loaders(cfg)
    assert data_classes(loaders["train"].dataset) == 2
    assert data_classes(TensorImageDataset(torch.zeros(3, 1, 4, 4), torch.tensor([0, 4, 1]))) == 5
    assert data_classes(object()) is None


def test_a_padded_split_labels_its_padding_and_keeps_the_originals_index() -> None:
    split = PaddedSplit(TensorImageDataset(torch.arange(5.0).view(5, 1, 1, 1), torch.ones(5)), 4)
    assert len(split) == 8
    assert [int(split[i][1]) for i in range(8)] == [1] * 5 + [PADDING_LABEL] * 3
    assert [split[i][2] for i in range(5, 8)] == [0, 1, 2]
    assert float(split[6][0]) == 1.0


def test_two_ranks_test_shards_hold_the_split_once_with_padding_labelled(photos: Path) -> None:
    cfg = load_config(LINEAR_EVAL, [*_folder(photos), *SMALL, "data.test_batch_size=2"])
    labels = [
        torch.cat(
            [batch["label"] for batch in build_data_loaders(cfg, rank=r, world_size=4)["test"]]
        )
        for r in range(4)
    ]
    assert [len(shard) for shard in labels] == [2, 2, 2, 2]  # 6 test images, 2 of padding
    assert sorted(torch.cat(labels).tolist()) == [PADDING_LABEL] * 2 + [0, 0, 0, 1, 1, 1]


def test_meters_and_loss_leave_out_the_padding() -> None:
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    batch = {"label": torch.tensor([0, 0, PADDING_LABEL])}
    accuracy = AccuracyMeter(topk=(1,))
    accuracy.update({"logits": logits}, batch)
    assert accuracy.value() == {"top1": 0.5}
    knn = KnnMeter(k=1)
    knn.set_memory(torch.eye(2), torch.tensor([0, 1]))
    knn.update({"features": logits}, batch)
    assert knn.value() == {"knn_top1": 0.5}
    loss = ClassificationLoss()({"logits": logits}, batch)
    expected = torch.nn.functional.cross_entropy(logits[:2], batch["label"][:2])
    assert torch.allclose(loss, expected)
    padding_only = {"label": torch.full((2,), PADDING_LABEL)}
    assert float(ClassificationLoss()({"logits": logits[:2]}, padding_only)) == 0.0


def test_gathered_features_in_one_process_drop_the_padding() -> None:
    features, labels = gather_labelled(torch.eye(3), torch.tensor([1, PADDING_LABEL, 0]))
    assert labels.tolist() == [1, 0]
    assert features.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


@pytest.mark.parametrize(
    ("pipeline", "setting", "cores", "world_size", "workers"),
    [
        ("batch", "auto", 16, 1, 0),
        ("crop_first", "auto", 2, 1, 1),
        ("crop_first", "auto", 1, 1, 0),
        ("crop_first", "auto", 16, 2, 7),
        ("crop_first", "auto", 64, 1, 8),
        ("crop_first", 3, 2, 1, 3),
    ],
)
def test_auto_workers_follow_the_cores_of_a_process(
    monkeypatch: pytest.MonkeyPatch,
    pipeline: str,
    setting: str | int,
    cores: int,
    world_size: int,
    workers: int,
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)))
    name = "image_folder" if pipeline != "batch" else "digits"
    cfg = load_config(
        LINEAR_EVAL,
        [f"data.name={name}", f"data.pipeline={pipeline}", f"data.num_workers={setting}"],
    )
    assert num_workers(cfg, world_size) == workers

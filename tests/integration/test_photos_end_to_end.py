"""A folder of real photographs, end to end: pretrain, export, embed, evaluate, resume.

The path of docs/quickstart.md's "Your own photos" on the shipped image-folder recipes,
shrunk to seconds: 16 train and 16 test JPEGs per class (tests/photos.py: crops of
scikit-learn's two sample photographs) at 32 px, a small CNN instead of the ResNet-18.
Chance is 0.5 (two classes); every evaluation must beat it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer, embed_images, load_config
from hookbus.export import export_backbone
from tests.kill_harness import kill_campaign
from tests.photos import make_photo_folder

ROOT = Path(__file__).resolve().parents[2]
PRETRAIN = ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml"
LINEAR_EVAL = ROOT / "configs" / "linear_eval_imagefolder_resnet18_small.yaml"
SMALL = (
    "data.image_size=32",
    "data.batch_size=8",
    "data.test_batch_size=32",
    "data.num_workers=0",
    "model.backbone.name=small_cnn",
    "model.backbone.width=8",
    "meters.knn.k=5",
    "machine.num_threads=1",
    "hooks.progress_bar.enabled=false",
    "hooks.summary_plot.enabled=false",
    "hooks.tensorboard.enabled=false",
)
"""The recipes' ResNet-18 at 96 px shrunk to a small CNN at 32 px, 8 images a step."""


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=16, size=40)


def _folder(photos: Path) -> tuple[str, str]:
    return (f"data.folder.train_dir={photos / 'train'}", f"data.folder.test_dir={photos / 'test'}")


def _last_test_row(run: Path) -> dict:
    rows = [json.loads(line) for line in (run / "metrics.json").read_text().splitlines()]
    return [row for row in rows if row["phase"] == "test"][-1]


@pytest.fixture(scope="module")
def pretrained(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of 2 epochs of SimCLR on the photos (8 steps), tested at the end."""
    run = tmp_path_factory.mktemp("pretrain")
    cfg = load_config(
        PRETRAIN,
        [
            *_folder(photos),
            *SMALL,
            "model.head.dims=[32,32,16]",
            "optimizer.num_epochs=2",
            "optimizer.warmup_epochs=0",
            "trainer.test_every_num_epochs=2",
            f"checkpoint.dir={run}",
        ],
    )
    state = SSLTrainer(cfg).train()
    assert state.iteration == 8
    return run


def test_pretraining_on_photos_gives_a_knn_above_chance(pretrained: Path) -> None:
    assert _last_test_row(pretrained)["knn_top1"] > 0.5


def test_linear_eval_of_the_exported_backbone_beats_chance(
    photos: Path, pretrained: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "backbone.pth"
    export_backbone(pretrained / "checkpoint.torch", exported)
    run = tmp_path / "linear"
    cfg = load_config(
        LINEAR_EVAL,
        [
            *_folder(photos),
            *SMALL,
            f"model.linear_eval.checkpoint={exported}",
            "optimizer.num_epochs=3",
            "trainer.test_every_num_epochs=3",
            f"checkpoint.dir={run}",
        ],
    )
    SSLTrainer(cfg).train()
    row = _last_test_row(run)
    assert row["top1"] > 0.5
    assert row["knn_top1"] > 0.5


def test_embeddings_of_the_export_match_the_checkpoints_and_find_the_class(
    photos: Path, pretrained: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "backbone.pth"
    export_backbone(pretrained / "checkpoint.torch", exported)
    recipe = pretrained / "config.yaml"
    train = embed_images(exported, photos / "train", recipe=recipe, num_workers=0)
    test = embed_images(exported, photos / "test", recipe=recipe, num_workers=0)
    direct = embed_images(pretrained / "checkpoint.torch", photos / "test", num_workers=0)
    assert test.paths == direct.paths
    assert len(test.paths) == 32
    torch.testing.assert_close(test.embeddings, direct.embeddings, rtol=0, atol=1e-5)
    # each test photo's nearest train photo (cosine) is of its class more often than chance
    similarity = torch.nn.functional.normalize(test.embeddings, dim=1) @ (
        torch.nn.functional.normalize(train.embeddings, dim=1).T
    )
    nearest = similarity.argmax(dim=1)
    classes = [Path(path).parent.name for path in train.paths]
    hits = [
        classes[int(n)] == Path(path).parent.name
        for n, path in zip(nearest, test.paths, strict=True)
    ]
    assert sum(hits) / len(hits) > 0.5


PHOTO_RUN = {
    "data": {
        "name": "image_folder",
        "pipeline": "crop_first",
        "image_size": 16,
        "num_workers": 0,
        "torchvision": {"blur_prob": 0.0},
    },
    "model": {"backbone": {"width": 4, "in_channels": 3}, "head": {"dims": [16, 16, 8]}},
}
"""The kill harness's tiny recipe on the photos: JPEG files, crop_first views."""


@pytest.mark.slow
def test_a_photo_run_killed_and_resumed_equals_an_uninterrupted_one(
    photos: Path, tmp_path: Path
) -> None:
    sections = {name: dict(values) for name, values in PHOTO_RUN.items()}
    sections["data"]["folder"] = {
        "train_dir": str(photos / "train"),
        "test_dir": str(photos / "test"),
        "labels": "class_folders",
    }
    outcome = kill_campaign(
        tmp_path, kills=1, seed=3, epochs=4, sections=sections, reference_here=True
    )
    assert outcome.kills == 1, outcome.notes
    assert outcome.identical_parameters
    assert outcome.identical_losses
    assert outcome.identical_iteration

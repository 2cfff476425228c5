"""Every method on the tiny ViT, a ResNet-18 and a timm ViT, over a folder of real
photographs, with no edit: a few steps each from ``hookbus.train``.

The only overrides make the runs short (one epoch of 32-pixel views, on the CPU); the
method's settings are the composed ones (distillation's teacher, which the user names,
is a small CNN). A method that masks patch tokens refuses a backbone without them in one
line, before anything is written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

import hookbus
from hookbus.compose import method_names
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.parts.models import BACKBONES
from tests.photos import make_photo_folder

MODELS = ("vit_tiny", "resnet18", "timm:vit_tiny_patch16_224")
"""hookbus's tiny ViT, hookbus's ResNet-18, and a timm model."""

REFUSED = {
    ("mae", "resnet18"),
    ("ibot", "resnet18"),
    ("dinov2", "resnet18"),
    ("dinov3", "resnet18"),
    ("ijepa", "resnet18"),
}
"""The pairs that cannot train: the method masks patch tokens the backbone has not."""

SHORT = {
    "epochs": 1,
    "image_size": 32,
    "device": "cpu",
    "hooks": {
        "progress_bar": {"enabled": False},
        "tensorboard": {"enabled": False},
        "summary_plot": {"enabled": False},
    },
}
"""One epoch of 32-pixel views on the CPU, no pictures: the run's length, not its method.
timm's ViT takes 64 (4 x 4 patches of 16); the ResNet-18 takes 16, which its five
halvings bring to one position as 32 does, at half the CPU time of a case."""

IMAGE_SIZES = {"timm:vit_tiny_patch16_224": 64, "resnet18": 16}
"""The models whose views are not :data:`SHORT`'s 32 pixels."""


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """32 crops of scikit-learn's two photographs, unlabelled (the train folder)."""
    return make_photo_folder(tmp_path_factory.mktemp("photos"), per_class=16, size=40) / "train"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Distillation's teacher, the user's to name: a small CNN of width 8 on RGB images."""
    path = tmp_path_factory.mktemp("teacher") / "teacher.pth"
    torch.manual_seed(1)
    net = BACKBONES.get("small_cnn")(BackboneConfig(name="small_cnn", width=8, in_channels=3))
    torch.save(net.state_dict(), path)
    return {"distillation": {"teacher": {"name": "small_cnn", "width": 8, "weights": str(path)}}}


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", method_names())
def test_every_method_trains_on_a_photo_folder_with_no_edits(
    photos: Path, tmp_path: Path, teacher: dict[str, Any], method: str, model: str
) -> None:
    out = tmp_path / "run"
    short: dict[str, Any] = {**SHORT, "image_size": IMAGE_SIZES.get(model, SHORT["image_size"])}
    if method == "distillation":
        short["loss"] = teacher  # the teacher, then nothing but the composed settings
    if (method, model) in REFUSED:
        with pytest.raises(ConfigError, match=f"method {method} masks the patch tokens"):
            hookbus.train(out=out, data=photos, method=method, model=model, **short)
        assert not out.exists()
        return
    run = hookbus.train(out=out, data=photos, method=method, model=model, **short)
    assert run.config.model.backbone.name == model
    assert run.checkpoint is not None and run.checkpoint.is_file()
    train = [row for row in run.history if row["train"]]
    assert [row["iteration"] for row in train] == [2]  # 32 images, batches of 16
    assert math.isfinite(train[0]["loss"])
    assert not run.config.meters.knn.enabled  # an unlabelled folder

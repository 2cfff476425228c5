"""Objects from Python: a backbone module, data sets, an optimizer factory and a loss
module given to SSLTrainer in place of the config's names.

The run trains, the effective config records each part's class, head sizes are checked
against the backbone's features, a wrong object or a data set of another shape is named
at once, a killed run resumes bit-exactly with the same objects, one resumed with other
objects (or none) is refused, and the export of the backbone loads into the user's class.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from PIL import Image
from torch import nn
from torch.utils.data import Dataset

from hookbus import SSLTrainer, default_hooks
from hookbus.engine.checkpoint.checkpoint_io import (
    load_verified_checkpoint,
    newest_valid_checkpoint,
)
from hookbus.engine.errors import ConfigError
from hookbus.export import export_backbone
from hookbus.parts.losses import build_loss
from tests.python_parts_job import Stripes, config, sgd, user_backbone

ROOT = Path(__file__).resolve().parents[2]


def train(run_dir: Path, **parts: Any) -> SSLTrainer:
    cfg = config(str(run_dir)).model_copy(deep=True)
    cfg.optimizer.num_epochs = 1
    cfg.checkpoint.iter_frequency = 0
    trainer = SSLTrainer(cfg, **parts)
    trainer.train()
    return trainer


def test_a_user_backbone_data_and_optimizer_train_and_are_recorded(tmp_path: Path) -> None:
    backbone = user_backbone()
    trainer = train(tmp_path, backbone=backbone, train_data=Stripes(), optimizer=sgd)
    state = trainer.state
    assert state.base_model.backbone is backbone
    assert backbone.out_dim == 8  # read from one forward pass
    assert isinstance(state.optimizer, torch.optim.SGD)
    assert state.optimizer.param_groups[0]["weight_decay"] == 1e-4
    assert state.iteration == 4
    recorded = yaml.safe_load((tmp_path / "config.yaml").read_text())["from_python"]
    assert recorded == {
        "backbone": "torch.nn.modules.container.Sequential",
        "train_data": "tests.python_parts_job.Stripes",
        "test_data": "tests.python_parts_job.Stripes",
        "optimizer": "tests.python_parts_job.sgd",
        "loss": None,
    }
    rows = [line for line in (tmp_path / "metrics.json").read_text().splitlines() if line]
    assert len(rows) == 2 and '"knn_top1"' in rows[1]


class CountingLoss(nn.Module):
    """The method's own loss, counting its calls."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.calls = 0

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self.calls += 1
        return self.inner(*args, **kwargs)


def test_a_loss_module_replaces_the_named_one(tmp_path: Path) -> None:
    loss = CountingLoss(build_loss(config(str(tmp_path))))
    trainer = train(tmp_path, backbone=user_backbone(), train_data=Stripes(), loss=loss)
    assert trainer.state.loss_fn is loss
    assert loss.calls == 4 + 2  # 4 train steps, 2 test steps
    assert trainer.cfg.from_python.loss == "tests.integration.test_python_parts.CountingLoss"
    assert trainer.cfg.from_python.optimizer is None


class PilImages(Dataset):
    """PIL images of varying size, for the torchvision pipeline."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, index: int) -> tuple[Image.Image, int]:
        shade = (index * 6) % 256
        return Image.new("RGB", (20 + index % 3, 18), (shade, 255 - shade, 80)), index % 2


def test_pil_images_train_through_the_torchvision_pipeline(tmp_path: Path) -> None:
    cfg = config(str(tmp_path)).model_copy(deep=True)
    cfg.data.pipeline = "torchvision"
    cfg.data.batch_size = 8
    cfg.optimizer.num_epochs = 1
    trainer = SSLTrainer(cfg, backbone=user_backbone(), train_data=PilImages())
    trainer.train()
    assert trainer.state.iteration == 5
    assert trainer.state.base_model.backbone.out_dim == 8


def test_a_torchvision_classifier_with_its_head_removed_is_a_backbone(tmp_path: Path) -> None:
    torchvision = pytest.importorskip("torchvision")
    net = torchvision.models.resnet18(num_classes=4)
    net.fc = nn.Identity()
    cfg = config(str(tmp_path)).model_copy(deep=True)
    cfg.model.head.dims = [512, 16, 8]
    cfg.optimizer.num_epochs = 1
    cfg.trainer.test_every_num_epochs = 100
    trainer = SSLTrainer(cfg, backbone=net, train_data=Stripes(32))
    trainer.train()
    assert trainer.state.iteration == 2
    exported = export_backbone(newest_valid_checkpoint(tmp_path)[0], tmp_path / "net.pth")
    fresh = torchvision.models.resnet18(num_classes=4)
    fresh.fc = nn.Identity()
    fresh.load_state_dict(torch.load(tmp_path / "net.pth", weights_only=True))
    assert torch.equal(fresh.conv1.weight, net.conv1.weight)
    assert "fc.weight" not in exported


def test_head_sizes_are_checked_against_the_backbone_features(tmp_path: Path) -> None:
    cfg = config(str(tmp_path)).model_copy(deep=True)
    cfg.model.head.dims = [32, 16, 8]
    trainer = SSLTrainer(cfg, backbone=user_backbone(), train_data=Stripes())
    with pytest.raises(ConfigError, match=r"model.head.dims\[0\] is 32 but backbone "):
        trainer.train()
    assert not (tmp_path / "config.yaml").exists()


class Unflattened(nn.Module):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return images


def test_a_backbone_that_does_not_return_features_is_named(tmp_path: Path) -> None:
    trainer = SSLTrainer(config(str(tmp_path)), backbone=Unflattened(), train_data=Stripes())
    with pytest.raises(ConfigError) as error:
        trainer.train()
    assert str(error.value) == (
        "backbone (tests.integration.test_python_parts.Unflattened) must return features "
        "[batch, D]; it returned [1, 3, 12, 12] (flatten or pool its output, or replace its "
        "classifier with nn.Identity())"
    )


class Images(Dataset):
    def __init__(self, item: Any) -> None:
        self.item = item

    def __len__(self) -> int:
        return 32

    def __getitem__(self, index: int) -> Any:
        return self.item


@pytest.mark.parametrize(
    ("item", "pipeline", "message"),
    [
        (torch.zeros(3, 12, 12), "batch", None),
        ("a.png", "batch", r"train_data\[0\] is a str; hookbus takes items \(image, label\)"),
        (("a.png", 1), "batch", r"train_data\[0\]: the image is a str; give a tensor"),
        ((torch.zeros(2, 3, 12, 12), 1), "batch", r"has shape \[2, 3, 12, 12\]; give \[C, H, W\]"),
        ((torch.zeros(3, 12, 12), 1), "torchvision", "torchvision takes uint8 images"),
        ((torch.zeros(3, 12, 12, dtype=torch.int64), 1), "batch", "uint8 or floating point"),
    ],
)
def test_data_sets_of_another_shape_are_named(
    tmp_path: Path, item: Any, pipeline: str, message: str | None
) -> None:
    cfg = config(str(tmp_path)).model_copy(deep=True)
    cfg.data.pipeline = pipeline
    trainer = SSLTrainer(cfg, backbone=user_backbone(), train_data=Images(item))
    if message is None:
        message = r"train_data\[0\] is a Tensor"
    with pytest.raises(ConfigError, match=message):
        trainer.setup()


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ({"backbone": lambda x: x}, "backbone must be a torch.nn.Module, got function"),
        ({"loss": "info_nce"}, "loss must be a torch.nn.Module, got str"),
        ({"train_data": 3}, "train_data must be a map-style data set"),
        ({"test_data": Stripes()}, "test_data needs train_data"),
        ({"optimizer": torch.optim.SGD([torch.zeros(1, requires_grad=True)])}, "factory"),
    ],
)
def test_objects_of_the_wrong_kind_are_refused_at_once(
    tmp_path: Path, parts: dict, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        SSLTrainer(config(str(tmp_path)), **parts)


def test_an_optimizer_factory_must_return_an_optimizer(tmp_path: Path) -> None:
    trainer = SSLTrainer(
        config(str(tmp_path)),
        train_data=Stripes(),
        backbone=user_backbone(),
        optimizer=lambda model: "sgd",
    )
    with pytest.raises(ConfigError, match="returned a str, not a torch.optim.Optimizer"):
        trainer.setup()


def test_the_evaluation_report_starts_from_the_backbone_as_given(tmp_path: Path) -> None:
    backbone = user_backbone()
    given = {name: value.clone() for name, value in backbone.state_dict().items()}
    cfg = config(str(tmp_path)).model_copy(deep=True)
    cfg.hooks.evaluation_report.enabled = True
    cfg.hooks.evaluation_report.draws = 1
    cfg.optimizer.num_epochs = 1
    trainer = SSLTrainer(cfg, backbone=backbone, train_data=Stripes(), optimizer=sgd)
    trainer.train()
    initial = trainer.state.initial_backbone.state_dict()
    assert all(torch.equal(initial[name], value) for name, value in given.items())
    assert not torch.equal(backbone[0].weight, given["0.weight"])  # the run trained it
    assert set(trainer.state.summary["evaluation"]) == {"random init", "trained"}


def run_job(run_dir: Path, kill_at: int = 0) -> int:
    command = [sys.executable, "-m", "tests.python_parts_job", str(run_dir)]
    if kill_at:
        command += ["--kill-at", str(kill_at)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, timeout=120).returncode


@pytest.mark.slow
def test_a_killed_run_with_python_objects_resumes_bit_exactly(tmp_path: Path) -> None:
    assert run_job(tmp_path / "whole") == 0
    assert run_job(tmp_path / "killed", kill_at=6) == -9  # SIGKILL during iteration 7
    assert newest_valid_checkpoint(tmp_path / "killed")[1]["iteration"] == 6
    assert run_job(tmp_path / "killed") == 0
    whole = load_verified_checkpoint(newest_valid_checkpoint(tmp_path / "whole")[0])
    resumed = load_verified_checkpoint(newest_valid_checkpoint(tmp_path / "killed")[0])
    assert whole["iteration"] == resumed["iteration"] == 16
    assert whole["model"].keys() == resumed["model"].keys()
    for name, value in whole["model"].items():
        assert torch.equal(value, resumed["model"][name]), name
    assert (tmp_path / "whole" / "metrics.json").read_bytes() == (
        tmp_path / "killed" / "metrics.json"
    ).read_bytes()


class Wider(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def test_resuming_needs_the_same_kinds_of_objects(tmp_path: Path) -> None:
    train(tmp_path, backbone=user_backbone(), train_data=Stripes(), optimizer=sgd)
    saved = config(str(tmp_path)).model_validate(
        yaml.safe_load((tmp_path / "config.yaml").read_text())
    )
    with pytest.raises(ConfigError) as error:
        SSLTrainer(saved, default_hooks(saved))
    assert str(error.value) == (
        "from_python.backbone: this config's backbone came from Python "
        "(torch.nn.modules.container.Sequential); pass backbone= to SSLTrainer to go on with it"
    )
    with pytest.raises(ConfigError, match="train_data was a tests.python_parts_job.Stripes, but"):
        SSLTrainer(saved, backbone=user_backbone(), train_data=PilImages(), optimizer=sgd)
    fresh = config(str(tmp_path)).model_copy(deep=True)
    fresh.optimizer.num_epochs = 2
    trainer = SSLTrainer(fresh, backbone=Wider(), train_data=Stripes(), optimizer=sgd)
    with pytest.raises(ConfigError, match="from_python.backbone"):
        trainer.train()  # a changed part is a config change the resumed run refuses

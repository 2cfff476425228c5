"""torchvision ResNet backbones and ``hookbus export`` into torchvision's resnet50."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torchvision.models import resnet18, resnet50

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import SmallCNN, build_model
from hookbus.parts.models.resnet import build_resnet
from tests.conftest import tiny_config


@pytest.mark.slow
def test_resnet_backbones_give_pooled_features_with_torchvision_keys() -> None:
    net = build_resnet("resnet18")
    assert net.out_dim == 512
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 512)
    reference = set(resnet18().state_dict()) - {"fc.weight", "fc.bias"}
    assert set(net.state_dict()) == reference


@pytest.mark.slow
def test_small_stem_keeps_the_resolution_of_small_images() -> None:
    net = build_resnet("resnet18", in_channels=1, small_stem=True)
    assert net.conv1.kernel_size == (3, 3)
    assert net.conv1.stride == (1, 1)
    assert isinstance(net.maxpool, nn.Identity)
    assert net(torch.randn(2, 1, 16, 16)).shape == (2, 512)


@pytest.mark.slow
def test_head_must_match_the_backbone_features() -> None:
    cfg = validate_config(
        {"model": {"backbone": {"name": "resnet18", "in_channels": 3}, "head": {"dims": [64, 8]}}}
    )
    with pytest.raises(ValueError, match="set model.head.dims\\[0\\] to 512"):
        build_model(cfg)


@pytest.mark.slow
def test_export_of_a_resnet50_run_loads_into_torchvision_resnet50(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = validate_config(
        {
            "trainer": {"test_model": False},
            "data": {
                "name": "synthetic",
                "image_size": 32,
                "batch_size": 4,
                "synthetic": {"train_size": 8, "channels": 3},
            },
            "model": {
                "backbone": {"name": "resnet50", "in_channels": 3},
                "head": {"dims": [2048, 32, 16]},
            },
            # Plain SGD keeps no optimizer state: a small checkpoint, a fast test.
            "optimizer": {"name": "sgd", "momentum": 0.0, "num_epochs": 1, "warmup_epochs": 0},
            "meters": {"knn": {"enabled": False}},
            "checkpoint": {"dir": str(run)},
        }
    )
    state = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    assert state.iteration == 2
    out = tmp_path / "resnet50.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    weights = torch.load(out, weights_only=True)
    torchvision_model = resnet50()
    torchvision_model.load_state_dict(weights)  # strict: every key, every shape
    trained = state.base_model.backbone.eval()
    torchvision_model.fc = nn.Identity()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(torchvision_model.eval()(images), trained(images))
    assert torch.count_nonzero(weights["fc.weight"]) == 0


@pytest.mark.slow
def test_export_of_the_small_cnn_loads_into_small_cnn(tmp_path: Path) -> None:
    run = tmp_path / "run"
    state = SSLTrainer(
        tiny_config(run, optimizer={"num_epochs": 1}), hooks=[CheckpointHook(run)]
    ).train()
    out = tmp_path / "cnn.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    cnn = SmallCNN(in_channels=1, width=4)
    cnn.load_state_dict(torch.load(out, weights_only=True))
    for key, value in cnn.state_dict().items():
        assert torch.equal(value, state.base_model.backbone.state_dict()[key])


def test_export_of_a_missing_checkpoint_is_a_user_error(tmp_path: Path, capsys) -> None:
    assert main(["export", str(tmp_path / "nope.torch"), str(tmp_path / "out.pth")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err

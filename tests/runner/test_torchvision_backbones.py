"""Any torchvision classification model as a backbone: ``model.backbone.name: tv:<name>``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.torchvision_any import zero_classifier
from hookbus.parts.task import check_component_names
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]


def build(name: str, **fields: object) -> nn.Module:
    return BACKBONES.get(name)(BackboneConfig(name=name, **fields))


def test_a_torchvision_resnet_by_name_has_torchvision_keys_without_the_classifier() -> None:
    net = build("tv:resnet18", in_channels=3, image_size=32)
    assert net.out_dim == 512
    assert isinstance(net.fc, nn.Identity)
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 512)
    assert set(net.state_dict()) == set(torchvision.models.resnet18().state_dict()) - {
        "fc.weight",
        "fc.bias",
    }


def test_the_last_linear_layer_of_a_sequential_classifier_is_removed() -> None:
    net = build("tv:mobilenet_v3_small", in_channels=1, image_size=32)
    assert net.classifier_path == "classifier.3"
    assert isinstance(net.classifier[3], nn.Identity)
    assert net.out_dim == 1024
    assert net.features[0][0].in_channels == 1  # the first convolution, for 1 channel
    assert net(torch.randn(2, 1, 32, 32)).shape == (2, 1024)
    # A file with the classifier (as hookbus export writes it) loads back strictly.
    net.load_state_dict({**net.state_dict(), **zero_classifier("mobilenet_v3_small", 1000)})


def test_a_model_without_a_linear_classifier_is_refused() -> None:
    with pytest.raises(ValueError, match="tv:squeezenet1_0: it has no nn.Linear classifier"):
        build("tv:squeezenet1_0", in_channels=3)


def test_a_typo_is_a_one_line_config_error_naming_close_names() -> None:
    cfg = validate_config({"model": {"backbone": {"name": "tv:resnet5"}}})
    with pytest.raises(ConfigError) as caught:
        check_component_names(cfg)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("model.backbone.name: unknown torchvision model 'resnet5'")
    assert "tv:resnet50" in message and "tv:resnet18" in message
    assert "tv:resnet18" in BACKBONES and "tv:resnet5" not in BACKBONES


def test_validate_reports_the_typo_with_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(ROOT / "configs" / "simclr_digits.yaml")
    assert main(["validate", recipe, "model.backbone.name=tv:mobilenet_v3_smal"]) == 2
    err = capsys.readouterr().err
    assert "tv:mobilenet_v3_small" in err
    assert "Traceback" not in err


def test_a_registered_name_typo_names_close_names() -> None:
    with pytest.raises(KeyError, match="close: vit_s16"):
        BACKBONES.get("vit_s18")


def test_the_head_must_match_the_inferred_feature_size() -> None:
    cfg = validate_config(
        {"model": {"backbone": {"name": "tv:resnet18"}, "head": {"dims": [64, 8]}}}
    )
    with pytest.raises(ValueError, match="set model.head.dims\\[0\\] to 512"):
        build_model(cfg)


def test_export_of_a_torchvision_run_loads_into_the_torchvision_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(
        run,
        optimizer={"num_epochs": 1},
        model={"backbone": {"name": "tv:resnet18"}, "head": {"dims": [512, 16, 8]}},
    )
    state = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    assert torch.isfinite(state.loss)
    out = tmp_path / "resnet18.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    weights = torch.load(out, weights_only=True)
    reference = torchvision.models.get_model("resnet18", weights=None)
    reference.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    reference.load_state_dict(weights)  # strict
    assert torch.count_nonzero(weights["fc.weight"]) == 0
    reference.fc = nn.Identity()
    images = torch.randn(2, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(
            reference.eval()(images), state.base_model.backbone.eval()(images)
        )


def test_a_torchvision_model_at_224_runs_forward_and_backward() -> None:
    net = build("tv:mobilenet_v3_small", in_channels=3, image_size=224)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    images = torch.randn(2, 3, 224, 224)
    for _ in range(2):
        optimizer.zero_grad()
        features = net(images)
        assert features.shape == (2, 1024)
        features.square().mean().backward()
        optimizer.step()
    assert all(torch.isfinite(p).all() for p in net.parameters())

"""Any timm model as a backbone: ``model.backbone.name: timm:<name>`` (the timm extra).

Every claim is checked against timm itself: its keys, its ``forward_features``, and
``timm.create_model(name, checkpoint_path=...)`` loading an export.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import timm
import torch
from torch import nn

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import BACKBONES, build_model
from hookbus.parts.models.build import check_backbone_options, zero_classifier_weights
from hookbus.parts.models.pretrained import load_backbone_weights
from hookbus.parts.models.timm_any import TimmViTTokens, timm_names
from hookbus.parts.task import check_component_names
from tests.conftest import tiny_config
from tests.tiny_data import tiny_recipe

ROOT = Path(__file__).resolve().parents[2]
VIT = "vit_tiny_patch16_224"


def build(name: str, **fields: object) -> nn.Module:
    return BACKBONES.get(name)(BackboneConfig(name=name, **fields))


def config_error(cfg_raw: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        check_component_names(validate_config(cfg_raw))
    return str(caught.value)


def test_a_timm_vit_by_name_has_timm_keys_without_the_classifier() -> None:
    net = build(f"timm:{VIT}", in_channels=1, image_size=32)
    assert net.out_dim == 192
    reference = timm.create_model(VIT, pretrained=False, in_chans=1, img_size=32)
    assert set(net.state_dict()) == set(reference.state_dict()) - {"head.weight", "head.bias"}
    assert net.pos_embed.shape == (1, 1 + 4, 192)  # a 2x2 grid of 16 px patches
    images = torch.randn(2, 1, 32, 32)
    net.eval()
    with torch.no_grad():
        # The features are the class token after the final norm.
        torch.testing.assert_close(net(images), net.forward_features(images)[:, 0])


def test_a_timm_cnn_takes_any_image_size_and_gives_its_pooled_features() -> None:
    net = build("timm:resnet18", in_channels=1, image_size=32)
    assert net.out_dim == 512
    assert net.conv1.in_channels == 1
    assert net(torch.randn(2, 1, 48, 48)).shape == (2, 512)


def test_the_head_follows_the_inferred_feature_size() -> None:
    cfg = validate_config(
        {
            "data": {"image_size": 32},
            "model": {"backbone": {"name": f"timm:{VIT}"}, "head": {"dims": ["backbone", 8]}},
        }
    )
    assert build_model(cfg).head.layers[0].in_features == 192


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("timm:vit_smal_patch16_224", "timm:vit_small_patch16_224"),
        ("timm:resnet5O", "timm:resnet50"),
        ("timm:convnext_tinny", "timm:convnext_tiny"),
    ],
)
def test_a_typo_is_a_one_line_config_error_naming_close_names(name: str, expected: str) -> None:
    message = config_error({"model": {"backbone": {"name": name}}})
    assert "\n" not in message
    assert message.startswith(f"model.backbone.name: unknown timm model {name[5:]!r}")
    assert expected in message
    assert expected in BACKBONES and name not in BACKBONES


def test_without_timm_the_config_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm raises ImportError
    timm_names.cache_clear()
    try:
        message = config_error({"model": {"backbone": {"name": f"timm:{VIT}"}}})
    finally:
        timm_names.cache_clear()
    assert message == (
        "model.backbone.name: the timm:<name> backbones need the timm package, which is not "
        "installed: pip install 'hookbus[timm]'"
    )


def test_validate_reports_a_typo_with_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(ROOT / "configs" / "simclr_digits.yaml")
    assert main(["validate", recipe, "model.backbone.name=timm:resnet1"]) == 2
    err = capsys.readouterr().err
    assert "timm:resnet18" in err
    assert "Traceback" not in err


def test_an_option_timm_models_do_not_read_is_refused() -> None:
    cfg = validate_config({"model": {"backbone": {"name": "timm:resnet18", "small_stem": True}}})
    with pytest.raises(ConfigError, match="backbone timm:resnet18 does not read it"):
        check_backbone_options(cfg)


def test_vit_patch_tokens_equal_timms_and_a_subset_is_encoded_alone() -> None:
    net = build(f"timm:{VIT}", in_channels=1, image_size=32).eval()
    tokens = TimmViTTokens(net)
    assert tokens.patch_size == 16
    images = torch.randn(2, 1, 32, 32)
    with torch.no_grad():
        every = tokens.patch_tokens(images)
        torch.testing.assert_close(every, net.forward_features(images)[:, 1:])
        in_order = tokens.patch_tokens(images, torch.arange(4).expand(2, 4))
        torch.testing.assert_close(in_order, every)
        some = tokens.patch_tokens(images, torch.tensor([[0, 3], [2, 1]]))
    assert some.shape == (2, 2, 192)
    # Fewer patches attend to each other: the tokens differ from the whole image's.
    assert not torch.allclose(some[0, 0], every[0, 0])


def test_export_of_a_timm_run_loads_into_timm_create_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(
        run,
        data={"image_size": 16, "batch_size": 8, "test_batch_size": 8},
        optimizer={"num_epochs": 1},
        model={"backbone": {"name": "timm:resnet18"}, "head": {"dims": ["backbone", 16, 8]}},
    )
    state = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    assert torch.isfinite(state.loss)
    out = tmp_path / "resnet18.pth"
    assert main(["export", str(run / "checkpoint.torch"), str(out)]) == 0
    weights = torch.load(out, weights_only=True)
    assert torch.count_nonzero(weights["fc.weight"]) == 0
    assert weights["fc.weight"].shape == (1000, 512)
    reference = timm.create_model("resnet18", in_chans=1, checkpoint_path=str(out))  # strict
    reference.reset_classifier(0)
    trained = state.base_model.backbone.eval()
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(reference.eval()(images), trained(images))
    # The exported file (its zero classifier dropped) loads back as a backbone's weights.
    fresh = build("timm:resnet18", in_channels=1, image_size=16)
    load_backbone_weights(fresh, out)
    with torch.no_grad():
        torch.testing.assert_close(fresh.eval()(images), trained(images))


def test_export_of_a_timm_vit_keeps_its_grid_for_timm(tmp_path: Path) -> None:
    backbone = BackboneConfig(name=f"timm:{VIT}", in_channels=1, image_size=32)
    net = BACKBONES.get(backbone.name)(backbone)
    weights = {**net.state_dict(), **zero_classifier_weights(backbone, net.state_dict(), 10)}
    path = tmp_path / "vit.pth"
    torch.save(weights, path)
    reference = timm.create_model(
        VIT, in_chans=1, img_size=32, num_classes=10, checkpoint_path=str(path)
    )
    assert torch.count_nonzero(reference.head.weight) == 0
    torch.testing.assert_close(reference.pos_embed, net.pos_embed)


def test_a_timm_vit_whose_patch_the_images_do_not_fill_is_refused_before_training(
    tmp_path: Path,
) -> None:
    # The tiny data's images are 8 px whatever data.image_size says: timm's ViT asserts
    # on their size, which becomes the one-line ConfigError before any step or file.
    cfg = tiny_recipe(
        "simclr_digits",
        tmp_path / "run",
        "data.image_size=32",
        "model.backbone.name=timm:vit_tiny_patch16_224",
        "model.backbone.in_channels=3",
        "model.head.dims=[backbone,16,8]",
    )
    with pytest.raises(ConfigError) as raised:
        SSLTrainer(cfg).train()
    message = str(raised.value)
    assert "model.backbone (timm:vit_tiny_patch16_224) cannot encode the" in message
    assert message.endswith("Input height (8) should be divisible by patch size (16).")
    assert not list((tmp_path / "run").glob("*.torch"))

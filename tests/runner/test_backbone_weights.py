"""``model.backbone.weights``: every format loads into the backbone and gives the features
of the library's own model with the same weights; the student and its momentum copies
start from them; the names users type (``timm/NAME``, ``torchvision/NAME``, tags) are one
spelling in the config.

The files are made here, from timm's and torchvision's own models (one in the official
DINOv2 key layout, with registers), never downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch
import torchvision
from safetensors.torch import save_file
from torch import nn

from hookbus import SSLTrainer
from hookbus.cli import main
from hookbus.config import validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.config.model_names import canonical_backbone_name
from hookbus.engine.errors import ConfigError
from hookbus.export import export_backbone
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.models import BACKBONES
from hookbus.parts.models.pretrained import load_backbone_weights, read_backbone_weights
from hookbus.parts.task import check_component_names
from tests.conftest import tiny_config

VIT = "vit_tiny_patch16_224"
DINOV2 = "vit_small_patch14_reg4_dinov2"
DINOV3 = "vit_small_patch16_dinov3"


def build(name: str, **fields: object) -> nn.Module:
    return BACKBONES.get(name)(BackboneConfig(name=name, **fields))


def same_features(a: nn.Module, b: nn.Module, images: torch.Tensor) -> None:
    a.eval()
    b.eval()
    with torch.no_grad():
        torch.testing.assert_close(a(images), b(images), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        ("timm/vit_tiny_patch16_224", "timm:vit_tiny_patch16_224"),
        ("timm:vit_tiny_patch16_224", "timm:vit_tiny_patch16_224"),
        ("torchvision/resnet34", "tv:resnet34"),
        ("torchvision:resnet34", "tv:resnet34"),
        ("tv/resnet34", "tv:resnet34"),
        ("timm/vit_small_patch14_dinov2.lvd142m", "timm:vit_small_patch14_dinov2.lvd142m"),
        ("resnet18", "resnet18"),
    ],
)
def test_every_spelling_of_a_name_is_kept_as_one(typed: str, kept: str) -> None:
    assert canonical_backbone_name(typed) == kept
    cfg = validate_config({"model": {"backbone": {"name": typed}}})
    assert cfg.model.backbone.name == kept


def test_a_tag_timm_has_validates_and_one_it_lacks_lists_the_tags() -> None:
    tagged = {"model": {"backbone": {"name": f"timm:{DINOV2}.lvd142m"}}}
    check_component_names(validate_config(tagged))
    with pytest.raises(ConfigError) as caught:
        check_component_names(
            validate_config({"model": {"backbone": {"name": f"timm:{DINOV2}.in1k"}}})
        )
    assert str(caught.value) == (
        f"model.backbone.name: timm has no pretrained weights 'in1k' for {DINOV2} "
        "(its tags: lvd142m)"
    )


def test_safetensors_of_a_timm_model_give_timms_features(tmp_path: Path) -> None:
    reference = timm.create_model(VIT, pretrained=False, num_classes=0, in_chans=1, img_size=32)
    save_file(reference.state_dict(), tmp_path / "vit.safetensors")
    net = build(f"timm:{VIT}", in_channels=1, image_size=32)
    load_backbone_weights(net, tmp_path / "vit.safetensors")
    same_features(net, reference, torch.randn(2, 1, 32, 32))


def test_a_torchvision_state_dict_with_its_classifier_gives_torchvisions_features(
    tmp_path: Path,
) -> None:
    reference = torchvision.models.resnet18(weights=None)
    torch.save(reference.state_dict(), tmp_path / "resnet18.pth")
    net = build("tv:resnet18", in_channels=3, image_size=32)
    load_backbone_weights(net, tmp_path / "resnet18.pth")
    reference.fc = nn.Identity()
    same_features(net, reference, torch.randn(2, 3, 32, 32))


def test_a_state_dict_nested_under_state_dict_with_a_ddp_prefix_loads(tmp_path: Path) -> None:
    reference = build("small_cnn", width=4)
    nested = {"state_dict": {f"module.{k}": v for k, v in reference.state_dict().items()}}
    torch.save(nested, tmp_path / "nested.pt")
    net = build("small_cnn", width=4)
    load_backbone_weights(net, tmp_path / "nested.pt")
    same_features(net, reference, torch.randn(2, 1, 8, 8))


def dinov2_official(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net``'s weights (timm's DINOv2 with registers) in the layout of the official
    DINOv2 files: the class token's position in ``pos_embed``, ``register_tokens``,
    ``mask_token``."""
    weights = dict(net.state_dict())
    slot = torch.randn(1, 1, weights["pos_embed"].shape[-1])
    official = {k: v for k, v in weights.items() if k not in ("cls_token", "reg_token")}
    official["pos_embed"] = torch.cat([slot, weights["pos_embed"]], dim=1)
    official["cls_token"] = weights["cls_token"] - slot
    official["register_tokens"] = weights["reg_token"]
    official["mask_token"] = torch.zeros(1, weights["cls_token"].shape[-1])
    return official


@pytest.mark.slow
def test_an_official_dinov2_file_gives_the_features_of_timms_own_loading(tmp_path: Path) -> None:
    # The file's grid (4x4 patches of 14 px) differs from the run's (2x2): timm resamples.
    source = timm.create_model(DINOV2, pretrained=False, num_classes=0, img_size=56)
    official = tmp_path / "dinov2_vits14_reg4_pretrain.pth"
    torch.save(dinov2_official(source), official)
    net = build(f"timm:{DINOV2}", in_channels=3, image_size=28)
    load_backbone_weights(net, official)
    reference = timm.create_model(
        DINOV2,
        pretrained=True,
        num_classes=0,
        img_size=28,
        pretrained_cfg_overlay={"file": str(official)},
    )
    same_features(net, reference, torch.randn(2, 3, 28, 28))
    torch.testing.assert_close(net.reg_token, source.reg_token, rtol=0, atol=0)


def dinov3_official(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net``'s weights (timm's DINOv3 ViT) in the layout of the official DINOv3 files:
    ``storage_tokens``, ``ls1.gamma``, a ``qkv.bias`` (all zero here, as timm's model
    has none) with its mask, the rotary embedding's periods and ``mask_token``."""
    official = {}
    for key, value in net.state_dict().items():
        key = key.replace("reg_token", "storage_tokens")
        official[key.replace("gamma_1", "ls1.gamma").replace("gamma_2", "ls2.gamma")] = value
        if key.endswith("attn.qkv.weight"):
            official[key.replace("weight", "bias")] = torch.zeros(value.shape[0])
            official[key.replace("weight", "bias_mask")] = torch.ones(value.shape[0])
    official["rope_embed.periods"] = torch.ones(8)
    official["mask_token"] = torch.zeros(1, net.cls_token.shape[-1])
    return official


@pytest.mark.slow
def test_an_official_dinov3_file_gives_the_features_of_timms_own_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = timm.create_model(DINOV3, pretrained=False, num_classes=0, img_size=32)
    official = tmp_path / "dinov3_vits16_pretrain.pth"
    torch.save(dinov3_official(source), official)
    net = build(f"timm:{DINOV3}", in_channels=3, image_size=32)
    load_backbone_weights(net, official)
    assert capsys.readouterr().out == ""  # what timm prints as it converts is kept quiet
    same_features(net, source, torch.randn(2, 3, 32, 32))


@pytest.mark.slow
def test_a_checkpoint_and_its_export_give_the_trained_backbone(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})
    trained = SSLTrainer(cfg, hooks=[CheckpointHook.from_config(cfg)]).train().base_model
    checkpoint = tmp_path / "run" / "checkpoint.torch"
    export_backbone(checkpoint, tmp_path / "export.pth")
    for path in (checkpoint, tmp_path / "export.pth"):
        net = build("small_cnn", width=4)
        load_backbone_weights(net, path)
        same_features(net, trained.backbone, torch.randn(2, 1, 8, 8))


def test_the_student_and_its_momentum_copy_start_from_the_weights(tmp_path: Path) -> None:
    start = build("small_cnn", width=4)
    torch.save(start.state_dict(), tmp_path / "start.pth")
    cfg = tiny_config(
        tmp_path / "run",
        model={
            "backbone": {"width": 4, "weights": str(tmp_path / "start.pth")},
            "head": {"dims": [16, 16, 8]},
        },
    )
    momentum = MomentumTeacherHook()
    trainer = SSLTrainer(cfg, hooks=[momentum])
    state = trainer.setup()
    momentum.on_start(trainer.engine)
    assert momentum.teacher is not None
    for model in (state.base_model, momentum.teacher):
        loaded = model.backbone.state_dict()
        assert all(torch.equal(loaded[k], v) for k, v in start.state_dict().items())
    assert read_backbone_weights(tmp_path / "start.pth").keys() == start.state_dict().keys()


def test_models_lists_each_library_under_its_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "resnet18"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "hookbus's backbones (1):",
        "  resnet18  torchvision's ResNet-18 trunk (512 features)",
        "torchvision's classification models (1; tv:NAME or torchvision/NAME, random init):",
        "  tv:resnet18",
        "timm's models (1; timm:NAME or timm/NAME, random init; --pretrained lists the tags "
        "of their weights):",
        "  timm:resnet18",
    ]


def test_models_pretrained_lists_timms_tags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "vit_small_patch14_*dinov2*", "--pretrained"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("timm's pretrained weights (2; timm:NAME.TAG or timm/NAME.TAG")
    assert lines[1:] == [
        "  timm:vit_small_patch14_dinov2.lvd142m",
        "  timm:vit_small_patch14_reg4_dinov2.lvd142m",
    ]

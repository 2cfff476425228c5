"""The encoder ``hookbus embed`` and ``hookbus eval`` load is built on the meta device
and takes the file's tensors: the same backbone, the same features, as one built and
initialised normally with the same weights loaded, for every kind of backbone (a
backbone with a buffer no state dict holds is built again normally)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus.config import load_config, validate_config
from hookbus.embed_source import _construct, load_encoder
from hookbus.parts.models import BACKBONES, backbone_config
from hookbus.parts.models.pretrained import backbone_state_dict
from tests.eval_runs import TINY, write_run

BACKBONE_SETTINGS = {
    "small_cnn": {"width": 4, "in_channels": 3},
    "resnet18": {"in_channels": 3},
    "vit_tiny": {"in_channels": 3},
    # RoPE periods and attention key biases: buffers no state dict holds
    "timm:vit_tiny_patch16_dinov3_qkvb": {"in_channels": 3},
}


def _settings(name: str) -> dict:
    size = 32 if name.startswith(("vit", "timm")) else 8
    backbone = {"name": name, **BACKBONE_SETTINGS[name]}
    return {**TINY, "data": {**TINY["data"], "image_size": size}, "model": {"backbone": backbone}}


def _built_normally(run_dir: Path) -> torch.nn.Module:
    """The run's backbone built on the CPU and initialised, then given the checkpoint's
    backbone weights, as a reference."""
    cfg = load_config(run_dir / "config.yaml")
    settings = backbone_config(cfg)
    reference = BACKBONES.get(settings.name)(settings)
    saved = torch.load(run_dir / "checkpoint.torch", weights_only=True)
    weights = backbone_state_dict(saved["model"])
    reference.load_state_dict(weights, strict=False)
    return reference.eval()


@pytest.mark.parametrize("name", list(BACKBONE_SETTINGS))
def test_the_loaded_encoder_equals_one_built_normally(tmp_path: Path, name: str) -> None:
    write_run(tmp_path / "run", _settings(name), seed=3)
    encoder = load_encoder(tmp_path / "run", require_image_files=False)
    tensors = dict(encoder.backbone.state_dict(keep_vars=True))
    tensors |= dict(encoder.backbone.named_buffers())
    assert not [key for key, value in tensors.items() if value.is_meta]
    assert all(value.dtype == torch.float32 for value in encoder.backbone.parameters())
    reference = _built_normally(tmp_path / "run")
    size = encoder.config.data.image_size
    images = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(encoder.backbone(images), reference(images))
    assert not encoder.backbone.training


def test_a_half_precision_export_loads_as_float32_weights(tmp_path: Path) -> None:
    write_run(tmp_path / "run", _settings("small_cnn"), seed=1)
    saved = torch.load(tmp_path / "run" / "checkpoint.torch", weights_only=True)
    weights = backbone_state_dict(saved["model"])
    torch.save({key: value.half() for key, value in weights.items()}, tmp_path / "half.pth")
    recipe = tmp_path / "run" / "config.yaml"
    encoder = load_encoder(tmp_path / "half.pth", recipe, require_image_files=False)
    loaded = encoder.backbone.state_dict()
    assert loaded.keys() == weights.keys()
    for key, value in loaded.items():
        assert value.dtype == weights[key].dtype, key  # float32, as the backbone's own
        assert torch.equal(value, weights[key].half().to(value.dtype)), key


@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "vit_tiny"])
def test_hookbus_backbones_are_built_without_memory_or_initialisation(name: str) -> None:
    settings = backbone_config(validate_config(_settings(name), "test"))
    backbone, on_meta = _construct(BACKBONES.get(name), settings)
    assert on_meta
    assert all(value.is_meta for value in backbone.state_dict().values())

"""A method entry names the builder of its own model (``MethodSpec.model``), and
``build_model`` builds it: the shipped entries that have one, a user's method, and the
names refused when an entry is declared."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookbus.config import Config, validate_config
from hookbus.engine.methods.entries import METHODS, MethodSpec, methods_in_order
from hookbus.parts.models import build_model
from hookbus.parts.models.build import BACKBONES, backbone_config, method_model_builder
from hookbus.parts.models.ijepa import JepaModel, build_jepa_model
from hookbus.parts.models.mae import MaskedAutoencoder, build_masked_autoencoder
from hookbus.parts.models.masked_distillation import (
    MaskedDistillationModel,
    build_masked_distillation,
)
from hookbus.parts.models.ssl_model import SSLModel
from hookbus.parts.models.ssl_parts import ssl_parts

VIT = {"backbone": {"name": "vit_tiny", "in_channels": 1}}
OWN_MODELS = {
    "mae": (build_masked_autoencoder, MaskedAutoencoder, {"data": {"num_views": 1}}),
    "ijepa": (build_jepa_model, JepaModel, {"data": {"num_views": 1}}),
    "dinov2": (build_masked_distillation, MaskedDistillationModel, {}),
    "ibot": (build_masked_distillation, MaskedDistillationModel, {}),
}
"""The shipped methods with a model of their own: its builder, its class, and the
settings a config of it needs beyond the tiny ViT (and prototypes for DINOv2 and iBOT)."""


class Doubled(nn.Module):
    """A user's model: the backbone's features twice over."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.backbone(images)] * 2, dim=1)


def build_doubled(cfg: Config, backbone: nn.Module, name: str | None) -> nn.Module:
    """The builder a test entry names (``tests.runner.test_method_models:build_doubled``)."""
    assert name == cfg.model.backbone.name
    return Doubled(backbone)


def config_of(method: str) -> Config:
    model = dict(VIT)
    if method in ("dinov2", "ibot"):
        model["prototypes"] = {"count": 16}
        model["head"] = {"dims": ["backbone", 32, 8]}
    sections = OWN_MODELS[method][2]
    return validate_config({**sections, "loss": {"name": method}, "model": model})


def test_the_entries_with_a_model_of_their_own_are_the_known_ones() -> None:
    named = {spec.name for spec in methods_in_order() if spec.model is not None}
    # distillation's: tests/runner/test_distillation.py; DINOv3's: its own tests
    assert named == {*OWN_MODELS, "dinov3", "distillation"}


@pytest.mark.parametrize("method", sorted(OWN_MODELS))
def test_an_entrys_model_path_names_its_builder_and_build_model_calls_it(method: str) -> None:
    builder, model_class, _ = OWN_MODELS[method]
    path = METHODS.get(method).model
    assert path is not None and method_model_builder(path) is builder
    model = build_model(config_of(method))
    assert type(model) is model_class


def test_masked_distillation_takes_the_ssl_models_head_and_prototypes() -> None:
    cfg = config_of("dinov2")
    torch.manual_seed(0)
    model = build_model(cfg)
    assert isinstance(model, MaskedDistillationModel)
    torch.manual_seed(0)
    backbone = BACKBONES.get("vit_tiny")(backbone_config(cfg))
    head, predictor, prototypes = ssl_parts(cfg, backbone, "vit_tiny")
    assert predictor is None and prototypes is not None
    for ours, theirs in ((model.head, head), (model.prototypes, prototypes)):
        expected = theirs.state_dict()
        assert list(ours.state_dict()) == list(expected)
        assert all(torch.equal(value, expected[key]) for key, value in ours.state_dict().items())
    assert prototypes.weight.shape == (16, 8)


def test_a_users_method_gets_the_model_its_entry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = MethodSpec(
        name="nt_xent_doubled",
        title="Test",
        model="tests.runner.test_method_models:build_doubled",
    )
    monkeypatch.setitem(METHODS._entries, spec.name, spec)
    cfg = validate_config({"loss": {"name": spec.name}})
    model = build_model(cfg)
    assert isinstance(model, Doubled)
    assert model(torch.zeros(2, 1, 16, 16)).shape == (2, 2 * model.backbone.out_dim)
    # Without the entry's model the same config builds the SSL model.
    monkeypatch.setitem(METHODS._entries, spec.name, MethodSpec(name=spec.name, title="Test"))
    assert type(build_model(cfg)) is SSLModel


@pytest.mark.parametrize(
    "path", ["tests.runner.test_method_models", "tests.runner:", ":build_doubled", "a.b:c-d"]
)
def test_a_model_path_that_is_not_module_colon_function_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match=r"model must be 'package.module:function', got"):
        MethodSpec(name="nt_xent_doubled", title="Test", model=path)

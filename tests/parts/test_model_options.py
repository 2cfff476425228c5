"""Every model option is read by the parts the run builds, or refused at validation with
a message naming its key: a backbone option by the backbones that read it, the predictor
and the prototypes by the losses that read them, the head and the MAE decoder by the
method that builds them."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hookbus.config import Config, validate_config
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import ConfigError
from hookbus.parts.losses.build import LOSSES, MODEL_PARTS
from hookbus.parts.models import BACKBONES
from hookbus.parts.models.build import BACKBONE_OPTIONS, check_backbone_options
from hookbus.parts.task import check_options_are_read

CHANGED: dict[str, Any] = {
    "width": 8,
    "in_channels": 3,
    "small_stem": True,
    "zero_init_residual": True,
    "image_size": 32,
    "vit": {"depth": 2},
}
"""A value other than the default for every backbone option."""

BUILT_IN = ["small_cnn", "resnet18", "resnet50", "vit_tiny", "vit_s16", "vit_b16", "tv:resnet18"]

PARTS = {"predictor": {"dims": [64, 32, 64]}, "prototypes": {"count": 16}}
"""A setting that builds each optional model part."""

PART_KEYS = {
    "predictor": ("model.predictor.dims", "[]"),
    "prototypes": ("model.prototypes.count", "0"),
}

SSL_LOSSES = [name for name in LOSSES.names() if name not in ("mae", "ijepa", "cross_entropy")]
"""The built-in losses of an SSL model (MAE has its own model, cross-entropy none)."""


def config(**sections: Any) -> Config:
    return validate_config(sections)


def with_python(cfg: Config, **parts: str) -> Config:
    """``cfg`` as SSLTrainer makes it when given these parts from Python."""
    return cfg.model_copy(update={"from_python": cfg.from_python.model_copy(update=parts)})


def refusal(check: Any, cfg: Config) -> str:
    with pytest.raises(ConfigError) as error:
        check(cfg)
    return str(error.value)


def test_every_option_has_a_changed_value_here() -> None:
    assert set(CHANGED) == set(BACKBONE_OPTIONS)
    for key, value in CHANGED.items():
        assert BackboneConfig.model_validate({key: value}).changed_keys()[0].split(".")[0] == key


@pytest.mark.parametrize("name", BUILT_IN)
@pytest.mark.parametrize("option", sorted(CHANGED))
def test_a_builtin_backbone_reads_each_option_or_refuses_it(name: str, option: str) -> None:
    cfg = config(model={"backbone": {"name": name, option: CHANGED[option]}})
    if option in BACKBONES.reads(name):
        check_backbone_options(cfg)
        return
    message = refusal(check_backbone_options, cfg)
    key = "vit.depth" if option == "vit" else option
    assert message.startswith(f"model.backbone.{key}: backbone {name} does not read it (an ")
    assert message.endswith("); remove it")


def test_the_refusal_names_the_backbones_that_read_the_option() -> None:
    cfg = config(model={"backbone": {"small_stem": True}})
    assert refusal(check_backbone_options, cfg) == (
        "model.backbone.small_stem: backbone small_cnn does not read it (an option of "
        "resnet18, resnet50); remove it"
    )
    cfg = config(model={"backbone": {"name": "resnet18", "image_size": 64}})
    assert "(an option of vit_b16, vit_s16, vit_tiny, tv:<name>, timm:<name>)" in refusal(
        check_backbone_options, cfg
    )


def state(name: str, **options: Any) -> dict[str, torch.Tensor]:
    """The state dict of backbone ``name`` built from seed 0 with ``options``."""
    torch.manual_seed(0)
    backbone = config(model={"backbone": {"name": name, **options}}).model.backbone
    if backbone.image_size is None:
        backbone = backbone.model_copy(update={"image_size": 16})
    return BACKBONES.get(name)(backbone).state_dict()


def same(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> bool:
    return first.keys() == second.keys() and all(
        a.shape == b.shape and torch.equal(a, b)
        for a, b in zip(first.values(), second.values(), strict=True)
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "vit_tiny"])
def test_every_option_a_backbone_reads_changes_the_module_it_builds(name: str) -> None:
    plain = state(name)
    for option in BACKBONES.reads(name):
        assert not same(state(name, **{option: CHANGED[option]}), plain), option


def test_a_backbone_registered_without_its_options_may_read_any() -> None:
    assert BACKBONES.reads("my_backbone") is None
    cfg = config(model={"backbone": {"name": "my_backbone", "small_stem": True, "width": 3}})
    check_backbone_options(cfg)


def test_a_backbone_from_python_leaves_every_backbone_option_unread() -> None:
    cfg = config(model={"backbone": {"name": "resnet18", "small_stem": True}})
    assert refusal(check_backbone_options, with_python(cfg, backbone="my.Net")) == (
        "model.backbone.small_stem: the backbone comes from Python (my.Net), which the "
        "options of model.backbone do not configure; remove it"
    )
    # The name may stay: the config's checks read it (a ViT for layer decay and MAE).
    named = config(model={"backbone": {"name": "vit_tiny"}})
    check_backbone_options(with_python(named, backbone="my.Net"))


@pytest.mark.parametrize("loss", SSL_LOSSES)
@pytest.mark.parametrize("part", MODEL_PARTS)
def test_an_ssl_loss_reads_each_optional_part_or_refuses_it(loss: str, part: str) -> None:
    reads = LOSSES.reads(loss)
    model = {name: PARTS[name] for name in {*reads, part}}
    if loss in ("dinov2", "dinov3", "ibot"):  # they mask a ViT's patches
        model["backbone"] = {"name": "vit_tiny"}
    section: dict = {"name": loss}
    if loss == "distillation":  # a teacher, and no projection head of model.head
        section["distillation"] = {"teacher": {"name": "small_cnn", "weights": "t.pth"}}
        model["head"] = {"dims": ["backbone", 128, 64]}
    cfg = config(loss=section, model=model)
    if part in reads:
        check_options_are_read(cfg)
        return
    key, off = PART_KEYS[part]
    message = refusal(check_options_are_read, cfg)
    assert message.startswith(f"{key}: loss.name {loss} reads no ")
    assert message.endswith(
        f"(the losses that do: {', '.join(LOSSES.readers(part))}); set {key}={off}"
    )


def test_a_loss_from_python_or_an_evaluation_run_may_have_any_part() -> None:
    cfg = config(model={"predictor": PARTS["predictor"]})
    assert "reads no predictions" in refusal(check_options_are_read, cfg)
    check_options_are_read(with_python(cfg, loss="my.Loss"))
    evaluation = {"linear_eval": {"enabled": True}, "prototypes": PARTS["prototypes"]}
    # Linear evaluation of an SSL recipe builds the backbone and a classifier only.
    one_view = {"num_views": 1}
    check_options_are_read(config(loss={"name": "cross_entropy"}, model=evaluation, data=one_view))


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"predictor": {"output_batch_norm": "affine"}},
            "model.predictor: model.predictor.output_batch_norm shapes the predictor, but "
            "model.predictor.dims is empty (no predictor is built): set model.predictor.dims, "
            "or remove model.predictor.output_batch_norm",
        ),
        (
            {"predictor": {"batch_norm": False}},
            "model.predictor: model.predictor.batch_norm shapes the predictor, but",
        ),
        (
            {"prototypes": {"weight_norm": True}},
            "model.prototypes: model.prototypes.weight_norm normalises the prototypes, but "
            "model.prototypes.count is 0 (no prototypes are built): set "
            "model.prototypes.count, or remove model.prototypes.weight_norm",
        ),
        (
            {"mae_decoder": {"depth": 2}},
            "model.mae_decoder.depth: the MAE decoder is built only for "
            "loss.name mae, not nt_xent; remove it",
        ),
    ],
)
def test_the_options_of_a_part_that_is_not_built_are_refused(model: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        config(model=model)
    assert message in str(error.value)


def test_mae_builds_no_projection_head_and_refuses_its_options() -> None:
    mae = {"data": {"num_views": 1}, "loss": {"name": "mae"}}
    backbone = {"name": "vit_tiny"}
    config(**mae, model={"backbone": backbone, "mae_decoder": {"depth": 2}})
    with pytest.raises(ConfigError) as error:
        config(**mae, model={"backbone": backbone, "head": {"dims": [64, 32]}})
    assert (
        "model.head.dims: loss.name mae has a decoder (model.mae_decoder), no projection "
        "head, so model.head is not used; remove it"
    ) in str(error.value)

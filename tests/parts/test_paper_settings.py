"""Settings of the papers' released code that the optimizer section expresses: weight
decay on every parameter (SimSiam, MoCo v3's ViT) or on matrices and kernels only, and a
model part that keeps its learning rate while the schedule moves the rest (SimSiam's
predictor)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from hookbus import Config
from hookbus.engine.config import BackboneConfig
from hookbus.parts.models import BACKBONES, MLPHead, build_model
from hookbus.parts.optim import (
    LARS,
    build_optimizer,
    learning_rate,
    set_learning_rate,
    set_weight_decay,
    weight_decay,
)
from tests.tiny_data import tiny_recipe, train_tiny


class TwoParts(nn.Module):
    """A backbone (conv, BatchNorm) and a predictor (linear with bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4))
        self.predictor = nn.Linear(4, 2)


def optimizer(**section: object) -> torch.optim.Optimizer:
    return build_optimizer(Config.model_validate({"optimizer": section}), TwoParts())


def shapes(group: dict) -> list[tuple[int, ...]]:
    return [tuple(p.shape) for p in group["params"]]


@pytest.mark.parametrize("name", ["adamw", "sgd", "lars"])
def test_every_parameter_is_decayed_when_biases_and_norms_are_not_excluded(name: str) -> None:
    opt = optimizer(name=name, weight_decay=0.1, exclude_bias_and_norm_from_weight_decay=False)
    (group,) = opt.param_groups
    assert group["weight_decay"] == 0.1
    assert shapes(group) == [(4, 1, 3, 3), (4,), (4,), (4,), (2, 4), (2,)]
    if name == "lars":
        assert isinstance(opt, LARS) and group["adapt"] is True


@pytest.mark.parametrize("name", ["adamw", "sgd", "lars"])
def test_biases_and_norms_are_excluded_by_default(name: str) -> None:
    decayed, plain = optimizer(name=name, weight_decay=0.1).param_groups
    assert (decayed["weight_decay"], plain["weight_decay"]) == (0.1, 0.0)
    assert shapes(plain) == [(4,), (4,), (4,), (2,)]


def test_a_fixed_lr_part_keeps_the_peak_rate_while_the_rest_follow_the_schedule() -> None:
    cfg = Config.model_validate(
        {
            "optimizer": {
                "name": "sgd",
                "lr": 0.05,
                "warmup_epochs": 1,
                "num_epochs": 4,
                "fixed_lr_for": ["predictor"],
            }
        }
    )
    opt = build_optimizer(cfg, TwoParts())
    fixed = [group for group in opt.param_groups if "fixed_lr" in group]
    moving = [group for group in opt.param_groups if "fixed_lr" not in group]
    assert [shapes(group) for group in fixed] == [[(2, 4)], [(2,)]]
    assert [group["weight_decay"] for group in fixed] == [cfg.optimizer.weight_decay, 0.0]
    for iteration, expected in ((0, 0.005), (9, 0.05), (25, 0.025), (39, 0.0)):
        set_learning_rate(opt, learning_rate(cfg.optimizer, iteration, 10))
        assert [group["lr"] for group in moving] == pytest.approx([expected] * 2, abs=1e-3)
        assert [group["lr"] for group in fixed] == [0.05, 0.05]


def test_fixed_lr_groups_survive_a_checkpoint_round_trip() -> None:
    opt = optimizer(name="adamw", lr=0.01, fixed_lr_for=["predictor"])
    restored = optimizer(name="adamw", lr=0.01, fixed_lr_for=["predictor"])
    set_learning_rate(opt, 0.003)
    restored.load_state_dict(opt.state_dict())
    assert [group.get("fixed_lr") for group in restored.param_groups] == [None, None, 0.01, 0.01]
    assert [group["lr"] for group in restored.param_groups] == [0.003, 0.003, 0.01, 0.01]


@pytest.mark.parametrize("part", ["predictr", "backbone.9", "head"])
def test_a_fixed_lr_part_the_model_lacks_is_refused_naming_its_parts(part: str) -> None:
    with pytest.raises(
        ValueError, match=rf"'{part}' names no trainable parameter.*backbone, predictor"
    ):
        optimizer(fixed_lr_for=[part])


@pytest.mark.parametrize("value", ["pred ictor", "1predictor", ""])
def test_a_fixed_lr_part_that_is_not_a_module_path_is_a_config_error(value: str) -> None:
    with pytest.raises(ValidationError, match="fixed_lr_for"):
        Config.model_validate({"optimizer": {"fixed_lr_for": [value]}})


@pytest.mark.slow
def test_simsiam_trains_with_its_predictor_at_a_fixed_rate(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "simsiam_digits",
        tmp_path / "run",
        "optimizer.fixed_lr_for=[predictor]",
        "optimizer.exclude_bias_and_norm_from_weight_decay=false",
    )
    assert cfg.optimizer.fixed_lr_for == ["predictor"]
    train_tiny(cfg)


def linears(head: nn.Module) -> list[bool]:
    """Whether each Linear layer of ``head`` has a bias, in order."""
    return [layer.bias is not None for layer in head.modules() if isinstance(layer, nn.Linear)]


@pytest.mark.parametrize(
    ("dims", "output_batch_norm", "expected"),
    [
        ([8, 6, 4], "none", [False, True]),
        ([8, 6, 5, 4], "no_affine", [False, False, False]),
        ([8, 6, 4], "affine", [False, False]),
    ],
)
def test_hidden_layers_without_bias(
    dims: list[int], output_batch_norm: str, expected: list[bool]
) -> None:
    head = MLPHead(dims, batch_norm=True, output_batch_norm=output_batch_norm, hidden_bias=False)
    assert linears(head) == expected
    assert not any(name.endswith("0.bias") for name, _ in head.named_parameters())


def test_hidden_biases_are_kept_by_default() -> None:
    assert linears(MLPHead([8, 6, 5, 4], batch_norm=True)) == [True, True, True]


def test_an_mlp_without_a_hidden_layer_refuses_hidden_bias_false() -> None:
    with pytest.raises(ValueError, match=r"needs a hidden layer, but the MLP \[8, 4\] has none"):
        MLPHead([8, 4], batch_norm=True, hidden_bias=False)


def test_the_head_and_predictor_sections_build_bias_free_hidden_layers() -> None:
    cfg = Config.model_validate(
        {
            "model": {
                "backbone": {"name": "small_cnn", "width": 2},
                "head": {"dims": ["backbone", 8, 4], "hidden_bias": False},
                "predictor": {"dims": [4, 6, 4], "hidden_bias": False},
            },
        }
    )
    model = build_model(cfg)
    assert (linears(model.head), linears(model.predictor)) == ([False, True], [False, True])


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"head": {"dims": ["backbone", 8], "hidden_bias": False}}, "hidden_bias false needs"),
        ({"predictor": {"dims": [64, 8], "hidden_bias": False}}, "hidden_bias false needs"),
        ({"predictor": {"hidden_bias": False}}, "model.predictor.dims is empty"),
    ],
)
def test_hidden_bias_false_without_a_hidden_layer_is_a_config_error(
    section: dict, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Config.model_validate({"model": section})


def wd_config(**section: object) -> Config:
    return Config.model_validate({"optimizer": {"num_epochs": 4, **section}})


@pytest.mark.parametrize(
    ("iteration", "expected"),
    [(0, 0.04), (20, 0.22), (10, 0.04 + 0.36 * (1 - 0.5**0.5) / 2), (40, 0.4), (55, 0.4)],
)
def test_the_weight_decay_follows_a_cosine_to_its_end(iteration: int, expected: float) -> None:
    cfg = wd_config(weight_decay=0.04, weight_decay_end=0.4, warmup_epochs=1)
    assert weight_decay(cfg.optimizer, iteration, 10) == pytest.approx(expected)


def test_the_weight_decay_is_constant_without_an_end() -> None:
    cfg = wd_config(weight_decay=0.05)
    assert [weight_decay(cfg.optimizer, i, 10) for i in (0, 17, 40)] == [0.05, 0.05, 0.05]


def test_set_weight_decay_moves_the_decayed_groups_only() -> None:
    opt = optimizer(name="adamw", weight_decay=0.04, weight_decay_end=0.4)
    set_weight_decay(opt, 0.3)
    assert [group["weight_decay"] for group in opt.param_groups] == [0.3, 0.0]


def test_a_weight_decay_end_without_a_start_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="starts at optimizer.weight_decay, which is 0"):
        wd_config(weight_decay=0.0, weight_decay_end=0.4)


@pytest.mark.slow
def test_a_run_with_a_weight_decay_end_sets_it_every_step(tmp_path: Path) -> None:
    cfg = tiny_recipe(
        "simsiam_digits",
        tmp_path / "run",
        "optimizer.weight_decay=0.04",
        "optimizer.weight_decay_end=0.4",
    )
    state = train_tiny(cfg)
    decays = [group["weight_decay"] for group in state.optimizer.param_groups]
    expected = weight_decay(cfg.optimizer, state.iteration - 1, state.phase_length)
    assert expected > 0.04
    assert decays[0] == pytest.approx(expected)
    assert decays[-1] == 0.0


def tiny_vit(**vit: object) -> nn.Module:
    torch.manual_seed(0)
    sizes = {"patch_size": 2, "width": 256, "depth": 1, "heads": 2, "mlp_dim": 16}
    cfg = BackboneConfig(name="vit_tiny", in_channels=3, image_size=8, vit={**sizes, **vit})
    return BACKBONES.get("vit_tiny")(cfg)


def test_the_class_token_starts_at_zero_by_default() -> None:
    assert torch.count_nonzero(tiny_vit().class_token) == 0


def test_a_normal_class_token_has_std_near_0_02() -> None:
    token = tiny_vit(class_token_init="normal").class_token.detach()
    assert token.shape == (1, 1, 256)
    assert 0.016 < float(token.std()) < 0.024
    assert abs(float(token.mean())) < 0.005


def test_an_unknown_class_token_init_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="class_token_init"):
        BackboneConfig(name="vit_tiny", vit={"class_token_init": "uniform"})

"""Optimizer parameter groups and the learning-rate schedule."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookbus import Config
from hookbus.engine.config import OptimizerConfig
from hookbus.parts.optim import build_optimizer, learning_rate, set_learning_rate


def network() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))


def optimizer(**section: object) -> torch.optim.Optimizer:
    return build_optimizer(Config.model_validate({"optimizer": section}), network())


def test_no_weight_decay_on_biases_and_norm_weights() -> None:
    opt = optimizer(weight_decay=0.05)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.05
    assert no_decay["weight_decay"] == 0.0
    assert [tuple(p.shape) for p in decay["params"]] == [(4, 1, 3, 3), (2, 4)]
    assert [tuple(p.shape) for p in no_decay["params"]] == [(4,), (4,), (4,), (2,)]


def test_frozen_parameters_are_left_out() -> None:
    model = network()
    model[0].weight.requires_grad_(False)
    opt = build_optimizer(Config(), model)
    assert sum(len(group["params"]) for group in opt.param_groups) == 5


def test_adamw_with_the_configured_rate() -> None:
    opt = optimizer(name="adamw", lr=0.01)
    assert isinstance(opt, torch.optim.AdamW)
    assert [group["lr"] for group in opt.param_groups] == [0.01, 0.01]


def test_adamw_betas_from_the_config() -> None:
    assert [g["betas"] for g in optimizer(name="adamw").param_groups] == [(0.9, 0.999)] * 2
    opt = optimizer(name="adamw", betas=[0.9, 0.95])
    assert [group["betas"] for group in opt.param_groups] == [(0.9, 0.95)] * 2


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"name": "sgd", "betas": [0.9, 0.95]}, "optimizer.betas is an AdamW setting"),
        ({"name": "lars", "betas": [0.8, 0.999]}, "optimizer.betas is an AdamW setting"),
        ({"betas": [0.9, 1.0]}, "less than 1"),
        ({"betas": [-0.1, 0.9]}, "greater than or equal to 0"),
        ({"betas": [0.9]}, "optimizer.betas.1\n  Field required"),
    ],
)
def test_bad_betas_are_refused(section: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config.model_validate({"optimizer": section})


def test_sgd_with_momentum() -> None:
    opt = optimizer(name="sgd", lr=0.1, momentum=0.8)
    assert isinstance(opt, torch.optim.SGD)
    assert opt.param_groups[0]["momentum"] == 0.8


COSINE = OptimizerConfig(lr=1.0, final_lr=0.1, warmup_epochs=2, num_epochs=10)
"""5 iterations per epoch below: 10 warm-up steps, 50 in all."""


@pytest.mark.parametrize(
    ("iteration", "expected"),
    [
        (0, 0.1),  # warm-up start: lr * 1 / 10
        (4, 0.5),
        (9, 1.0),  # warm-up end
        (10, 1.0),  # cosine start
        (30, 0.55),  # half-way: (lr + final_lr) / 2
        (50, 0.1),  # end
        (60, 0.1),  # kept after the end
    ],
)
def test_warmup_then_cosine(iteration: int, expected: float) -> None:
    assert learning_rate(COSINE, iteration, 5) == pytest.approx(expected)


def test_constant_schedule_after_warmup() -> None:
    cfg = OptimizerConfig(lr=0.3, warmup_epochs=1, num_epochs=4, schedule="constant")
    assert [learning_rate(cfg, i, 2) for i in (0, 1, 2, 7)] == pytest.approx([0.15, 0.3, 0.3, 0.3])


def test_no_warmup_starts_at_the_peak() -> None:
    cfg = OptimizerConfig(lr=0.3, warmup_epochs=0, num_epochs=4)
    assert learning_rate(cfg, 0, 10) == pytest.approx(0.3)


def test_set_learning_rate_sets_every_group() -> None:
    opt = optimizer()
    set_learning_rate(opt, 0.123)
    assert [group["lr"] for group in opt.param_groups] == [0.123, 0.123]

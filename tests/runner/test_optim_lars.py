"""LARS against a slow reference computation; its groups, its state, and resume with it."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from hookbus import Config, SSLTrainer, default_hooks
from hookbus.engine.errors import PreemptedError
from hookbus.parts.optim import LARS, build_optimizer
from tests.conftest import tiny_config
from tests.integration.test_preemption import SignalAt
from tests.parts.test_optim import network


def reference_lars(
    weights: list[list[float]],
    grads: list[list[list[float]]],
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
    eta: float,
    adapt: bool,
) -> list[list[float]]:
    """LARS on plain Python floats: one weight vector per tensor, one gradient per step."""
    weights = [list(w) for w in weights]
    buffers: list[list[float] | None] = [None] * len(weights)
    for step_grads in grads:
        for index, (w, g) in enumerate(zip(weights, step_grads, strict=True)):
            d = [gi + weight_decay * wi for gi, wi in zip(g, w, strict=True)]
            w_norm = math.sqrt(sum(x * x for x in w))
            d_norm = math.sqrt(sum(x * x for x in d))
            if adapt and w_norm > 0 and d_norm > 0:
                d = [x * eta * w_norm / d_norm for x in d]
            old = buffers[index]
            buf = d if old is None else [momentum * b + x for b, x in zip(old, d, strict=True)]
            buffers[index] = buf
            weights[index] = [wi - lr * b for wi, b in zip(w, buf, strict=True)]
    return weights


WEIGHTS = [[0.5, -1.0, 2.0], [0.0, 0.0]]  # the second has norm 0: no trust ratio
GRADS = [
    [[0.1, 0.2, -0.3], [1.0, -2.0]],
    [[-0.4, 0.0, 0.5], [0.5, 0.5]],
    [[0.0, 0.0, 0.0], [0.1, -0.1]],  # a zero gradient: weight decay alone
]


@pytest.mark.parametrize("adapt", [True, False])
def test_three_steps_equal_the_reference(adapt: bool) -> None:
    settings = {"lr": 0.5, "momentum": 0.9, "weight_decay": 0.01}
    params = [nn.Parameter(torch.tensor(w, dtype=torch.float64)) for w in WEIGHTS]
    optimizer = LARS(params, trust_coefficient=0.02, adapt=adapt, **settings)
    for step_grads in GRADS:
        for param, grad in zip(params, step_grads, strict=True):
            param.grad = torch.tensor(grad, dtype=torch.float64)
        optimizer.step()
    expected = reference_lars(WEIGHTS, GRADS, eta=0.02, adapt=adapt, **settings)
    for param, want in zip(params, expected, strict=True):
        assert param.detach().tolist() == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_the_trust_ratio_makes_the_step_independent_of_the_gradient_scale() -> None:
    steps = []
    for scale in (1.0, 1000.0):
        param = nn.Parameter(torch.tensor([3.0, 4.0]))
        param.grad = torch.tensor([0.6, -0.8]) * scale
        LARS([param], lr=1.0, momentum=0.0, trust_coefficient=0.1).step()
        steps.append(torch.tensor([3.0, 4.0]) - param.detach())
    # |w| = 5, so every step has length 0.1 * 5 = 0.5, whatever the gradient's size
    for step in steps:
        assert torch.linalg.vector_norm(step).item() == pytest.approx(0.5)
    torch.testing.assert_close(steps[0], steps[1])


def test_parameters_without_a_gradient_are_left_alone() -> None:
    used, unused = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    used.grad = torch.ones(2)
    optimizer = LARS([used, unused], lr=0.1)
    optimizer.step()
    assert unused.tolist() == [1.0, 1.0]
    assert unused not in optimizer.state
    assert used.tolist() != [1.0, 1.0]


def test_built_from_config_with_biases_and_norms_neither_adapted_nor_decayed() -> None:
    cfg = Config.model_validate(
        {
            "optimizer": {
                "name": "lars",
                "lr": 0.3,
                "momentum": 0.8,
                "weight_decay": 1e-6,
                "trust_coefficient": 0.002,
            }
        }
    )
    optimizer = build_optimizer(cfg, network())
    assert isinstance(optimizer, LARS)
    adapted, plain = optimizer.param_groups
    assert (adapted["adapt"], adapted["weight_decay"]) == (True, 1e-6)
    assert (plain["adapt"], plain["weight_decay"]) == (False, 0.0)
    assert [tuple(p.shape) for p in adapted["params"]] == [(4, 1, 3, 3), (2, 4)]
    assert {g["lr"] for g in optimizer.param_groups} == {0.3}
    assert {g["momentum"] for g in optimizer.param_groups} == {0.8}
    assert {g["trust_coefficient"] for g in optimizer.param_groups} == {0.002}


def test_state_round_trips_through_a_weights_only_checkpoint() -> None:
    torch.manual_seed(0)
    model, twin = network(), network()
    twin.load_state_dict(model.state_dict())
    cfg = Config.model_validate({"optimizer": {"name": "lars", "lr": 0.1}})
    first = build_optimizer(cfg, model)
    inputs = torch.randn(4, 1, 3, 3)

    def step(net: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()
        net(inputs).square().sum().backward()
        optimizer.step()

    step(model, first)
    step(twin, build_optimizer(cfg, twin))
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = build_optimizer(cfg, twin)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    step(model, first)
    step(twin, resumed)
    for mine, theirs in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"lr": 0.0}, "lr must be positive"),
        ({"lr": 0.1, "momentum": 1.0}, "momentum must be in"),
        ({"lr": 0.1, "trust_coefficient": 0.0}, "trust_coefficient must be positive"),
    ],
)
def test_bad_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LARS([nn.Parameter(torch.ones(1))], **settings)


def test_a_lars_run_with_clipping_preempted_mid_phase_resumes_bit_exactly(tmp_path: Path) -> None:
    optimizer = {"name": "lars", "lr": 0.5, "weight_decay": 1e-4, "clip_grad_norm": 0.5}
    reference = SSLTrainer(tiny_config(tmp_path / "reference", optimizer=optimizer)).train()
    cfg = tiny_config(tmp_path / "run", optimizer=optimizer)
    with pytest.raises(PreemptedError, match=r"in phase 3/\d+ after step 2 "):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(5)]).train()
    resumed = SSLTrainer(cfg).train()
    assert resumed.iteration == reference.iteration == 6
    expected = reference.base_model.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in resumed.base_model.state_dict().items())
    buffers = [s["momentum_buffer"] for s in reference.optimizer.state_dict()["state"].values()]
    again = [s["momentum_buffer"] for s in resumed.optimizer.state_dict()["state"].values()]
    assert len(buffers) == len(again) > 0
    assert all(torch.equal(a, b) for a, b in zip(buffers, again, strict=True))

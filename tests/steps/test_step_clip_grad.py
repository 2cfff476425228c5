"""optimizer.clip_grad_norm: the standard step clips the true gradients before the update."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ignite.engine import Engine
from torch import nn

from hookbus import Hook, SSLTrainer
from hookbus.steps.standard import clip_gradients
from tests.conftest import tiny_config


def global_norm(params: list[torch.Tensor]) -> float:
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()


def two_parameters() -> tuple[list[nn.Parameter], torch.optim.Optimizer]:
    params = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(1))]
    params[0].grad, params[1].grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])  # norm 5
    return params, torch.optim.SGD(params, lr=1.0)


def test_gradients_above_the_limit_are_scaled_down_to_it() -> None:
    params, optimizer = two_parameters()
    assert clip_gradients(optimizer, None, 1.0).item() == pytest.approx(5.0)  # before
    assert params[0].grad.tolist() == pytest.approx([0.6, 0.0], rel=1e-5)
    assert params[1].grad.tolist() == pytest.approx([0.8], rel=1e-5)


def test_gradients_below_the_limit_and_a_zero_limit_change_nothing() -> None:
    params, optimizer = two_parameters()
    assert clip_gradients(optimizer, None, 10.0).item() == pytest.approx(5.0)
    assert clip_gradients(optimizer, None, 0.0) is None
    assert [p.grad.tolist() for p in params] == [[3.0, 0.0], [4.0]]


def test_with_a_grad_scaler_the_true_gradients_are_clipped_and_unscaled_once() -> None:
    params, optimizer = two_parameters()
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    assert scaler.scale(torch.ones(())).item() == 8.0  # the scaler is now in use
    for param in params:
        param.grad *= 8.0  # as backward of a scaled loss leaves them
    clip_gradients(optimizer, scaler, 1.0)
    scaler.step(optimizer)  # must not divide by the scale a second time
    assert params[0].tolist() == pytest.approx([-0.6, 0.0], rel=1e-5)
    assert params[1].tolist() == pytest.approx([-0.8], rel=1e-5)


class GradNorms(Hook):
    """Records the global gradient norm the optimizer stepped with, and the run state's
    ``grad_norm`` (the norm before clipping)."""

    def __init__(self) -> None:
        super().__init__()
        self.norms: list[float] = []
        self.reported: list[float | None] = []

    def on_update(self, engine: Engine) -> None:
        params = [p for p in engine.state.base_model.parameters() if p.grad is not None]
        self.norms.append(global_norm(params))
        reported = engine.state.grad_norm
        self.reported.append(None if reported is None else reported.item())


@pytest.mark.parametrize("amp", [None, "fp16"])
def test_a_run_steps_with_clipped_gradients(tmp_path: Path, amp: str | None) -> None:
    model = {"amp": {"enabled": amp is not None, "dtype": amp or "bf16"}}
    free, clipped = GradNorms(), GradNorms()
    runs = [({}, free, "free"), ({"clip_grad_norm": 1e-3}, clipped, "clipped")]
    for optimizer, hook, name in runs:
        cfg = tiny_config(tmp_path / name, optimizer={"num_epochs": 1, **optimizer}, model=model)
        SSLTrainer(cfg, hooks=[hook]).train()
    assert len(free.norms) == len(clipped.norms) == 3
    # an fp16 step whose scaled gradients overflowed is skipped by the scaler (norm nan)
    free_norms = [norm for norm in free.norms if norm == norm]
    clipped_norms = [norm for norm in clipped.norms if norm == norm]
    assert free_norms and clipped_norms, "every fp16 step overflowed"
    assert min(free_norms) > 1e-2
    assert clipped_norms == pytest.approx([1e-3] * len(clipped_norms), rel=1e-3)
    assert free.reported == [None] * 3
    # the first step starts from the same weights: the same norm, reported before clipping
    if amp is None:
        assert clipped.reported[0] == pytest.approx(free.norms[0], rel=1e-5)
    assert all(norm != norm or norm > 1e-2 for norm in clipped.reported)

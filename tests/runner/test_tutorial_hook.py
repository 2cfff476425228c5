"""The hook of the "Write a hook" tutorial (examples/grad_norm_hook.py), on the fake engine."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.examples.grad_norm_hook import GradNormHook
from hookbus.testing import FakeEngine, tiny_config


def model_with_grads() -> torch.nn.Module:
    model = torch.nn.Linear(2, 1)
    model.weight.grad = torch.ones(1, 2)
    model.bias.grad = torch.tensor([2.0])
    return model


def test_logs_the_gradient_norm_every_second_iteration(caplog: pytest.LogCaptureFixture) -> None:
    engine = FakeEngine(base_model=model_with_grads())
    hook = GradNormHook(every=2).attach(engine)
    with caplog.at_level(logging.INFO, logger="hookbus"):
        for _ in range(4):
            engine.step(train=True)
    assert caplog.messages == [
        "iteration 2: gradient norm 2.4495",
        "iteration 4: gradient norm 2.4495",
    ]
    assert hook.largest == pytest.approx(6**0.5)


def test_test_steps_and_other_ranks_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    engine = FakeEngine(base_model=model_with_grads(), rank=1)
    GradNormHook(every=1).attach(engine)
    with caplog.at_level(logging.INFO, logger="hookbus"):
        engine.step(train=True)
        engine.state.rank = 0
        engine.step(train=False)
    assert caplog.messages == []


def test_the_largest_norm_is_kept_in_checkpoints() -> None:
    hook = GradNormHook(every=1)
    hook.largest = 3.5
    restored = GradNormHook(every=1)
    restored.load_state_dict(hook.state_dict())
    assert restored.has_state() and restored.largest == 3.5


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every must be >= 1"):
        GradNormHook(every=0)


def test_a_recipe_adds_it_by_name(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        trainer={"imports": ["hookbus.examples.grad_norm_hook"]},
        hooks={"extra": [{"name": "grad_norm", "params": {"every": 1}}]},
    )
    trainer = SSLTrainer(cfg)
    trainer.train()
    hook = next(hook for hook in trainer.hooks if hook.name == "grad_norm")
    assert hook.largest > 0
    assert "gradient norm" in (tmp_path / "run" / "log.txt").read_text()

from __future__ import annotations

import pytest
import torch

from hookbus import HOOKS, Config, FakeEngine, Priority, SSLEvents
from hookbus.hooks.nan_check import NanCheckHook, NonFiniteLossError


def train_engine(**fields: object) -> FakeEngine:
    return FakeEngine(phase_idx=2, phase_name="train", phase_length=50, **fields)


def test_registered_with_priority() -> None:
    assert HOOKS.get("nan_check") is NanCheckHook
    assert NanCheckHook().priority == Priority.HIGH
    assert NanCheckHook().name == "nan_check"
    assert issubclass(NonFiniteLossError, FloatingPointError)


def test_from_config_checks_at_log_steps_and_iteration_checkpoints_by_default() -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 25
    assert NanCheckHook.from_config(cfg).check_frequency == 25
    cfg.checkpoint.iter_frequency = 10
    assert NanCheckHook.from_config(cfg).check_frequency == 5
    cfg.checkpoint.iter_frequency = 50
    assert NanCheckHook.from_config(cfg).check_frequency == 25


def test_from_config_takes_the_configured_frequency() -> None:
    cfg = Config()
    cfg.hooks.nan_check.check_frequency = 4
    assert NanCheckHook.from_config(cfg).check_frequency == 4


def test_nan_loss_in_train_phase_names_iteration_phase_and_step() -> None:
    engine = train_engine(loss=torch.tensor(float("nan")), iteration=12, batches=2)
    NanCheckHook().attach(engine)
    with pytest.raises(NonFiniteLossError) as error:
        engine.step(train=True)
    assert str(error.value) == "loss is nan at train iteration 13, phase 2 (train), step 3/50"
    assert engine.state.iteration == 13  # the step is counted before it runs, as ignite does


def test_infinite_loss_in_test_phase_names_last_train_iteration() -> None:
    engine = FakeEngine(
        loss=torch.tensor(float("inf")),
        phase_idx=3,
        phase_name="test",
        phase_length=5,
        iteration=12,
        batches=1,
    )
    NanCheckHook().attach(engine)
    with pytest.raises(NonFiniteLossError) as error:
        engine.step(train=False)
    assert str(error.value) == "loss is inf at phase 3 (test), step 2/5, after train iteration 12"


def test_finite_losses_pass() -> None:
    engine = train_engine(loss=torch.tensor(1.5))
    NanCheckHook().attach(engine)
    for _ in range(3):
        engine.step(train=True)
    assert engine.state.iteration == 3


def test_deferred_check_names_the_first_bad_step() -> None:
    engine = train_engine(loss=torch.tensor(1.0))
    NanCheckHook(check_frequency=3).attach(engine)
    engine.step(train=True)
    engine.state.loss = torch.tensor(float("nan"))
    engine.step(train=True)
    with pytest.raises(NonFiniteLossError) as error:
        engine.step(train=True)
    assert str(error.value) == "loss is nan at train iteration 2, phase 2 (train), step 2/50"


def test_deferred_check_runs_at_multiples_of_check_frequency() -> None:
    engine = train_engine(loss=torch.tensor(float("nan")), iteration=2, batches=2)
    NanCheckHook(check_frequency=3).attach(engine)
    with pytest.raises(NonFiniteLossError, match="at train iteration 3,"):
        engine.step(train=True)


def test_deferred_check_in_test_phase_runs_at_multiples_of_phase_steps() -> None:
    engine = FakeEngine(loss=torch.tensor(float("nan")), phase_idx=1, phase_name="test")
    engine.state.phase_length = 4
    NanCheckHook(check_frequency=2).attach(engine)
    engine.step(train=False)
    with pytest.raises(NonFiniteLossError, match=r"at phase 1 \(test\), step 1/4"):
        engine.step(train=False)


def test_phase_end_checks_the_steps_left() -> None:
    engine = train_engine(loss=torch.tensor(float("-inf")))
    NanCheckHook(check_frequency=10).attach(engine)
    engine.step(train=True)
    with pytest.raises(NonFiniteLossError, match="loss is -inf at train iteration 1"):
        engine.fire_event(SSLEvents.ON_PHASE_END)


def test_a_stop_request_checks_the_steps_left_before_the_preemption_checkpoint() -> None:
    engine = train_engine(loss=torch.tensor(float("nan")))
    NanCheckHook(check_frequency=10).attach(engine)
    engine.step(train=True)
    engine.state.loss = torch.tensor(1.0)
    engine.state.stop_requested = "SIGTERM"
    with pytest.raises(NonFiniteLossError, match="loss is nan at train iteration 1,"):
        engine.step(train=True)

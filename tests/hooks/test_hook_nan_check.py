from __future__ import annotations

import pytest
import torch

from hookbus import HOOKS, Config, FakeEngine, Priority, SSLEvents
from hookbus.hooks.nan_check import DegenerateTrainingError, NanCheckHook, NonFiniteLossError
from tests.hook_stubs import Phase

PLAN = [Phase(train=True, length=50), Phase(train=False, length=5)] * 3
"""Six phases: the messages count them from 1 (``phase_idx`` 2 is ``phase 3/6``)."""


def train_engine(**fields: object) -> FakeEngine:
    return FakeEngine(phases=PLAN, phase_idx=2, phase_name="train", phase_length=50, **fields)


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
    assert str(error.value) == "loss is nan at train iteration 13, phase 3/6 (train), step 3/50"
    assert engine.state.iteration == 13  # the step is counted before it runs, as ignite does


def test_infinite_loss_in_test_phase_names_last_train_iteration() -> None:
    engine = FakeEngine(
        loss=torch.tensor(float("inf")),
        phases=PLAN,
        phase_idx=3,
        phase_name="test",
        phase_length=5,
        iteration=12,
        batches=1,
    )
    NanCheckHook().attach(engine)
    with pytest.raises(NonFiniteLossError) as error:
        engine.step(train=False)
    assert str(error.value) == "loss is inf at phase 4/6 (test), step 2/5, after train iteration 12"


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
    assert str(error.value) == "loss is nan at train iteration 2, phase 3/6 (train), step 2/50"


def test_deferred_check_runs_at_multiples_of_check_frequency() -> None:
    engine = train_engine(loss=torch.tensor(float("nan")), iteration=2, batches=2)
    NanCheckHook(check_frequency=3).attach(engine)
    with pytest.raises(NonFiniteLossError, match="at train iteration 3,"):
        engine.step(train=True)


def test_deferred_check_in_test_phase_runs_at_multiples_of_phase_steps() -> None:
    engine = FakeEngine(
        loss=torch.tensor(float("nan")), phases=PLAN, phase_idx=1, phase_name="test"
    )
    engine.state.phase_length = 4
    NanCheckHook(check_frequency=2).attach(engine)
    engine.step(train=False)
    with pytest.raises(NonFiniteLossError, match=r"at phase 2/6 \(test\), step 1/4"):
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


def test_from_config_takes_max_loss_and_checks_the_state_at_iteration_checkpoints() -> None:
    cfg = Config()
    cfg.checkpoint.iter_frequency = 7
    cfg.hooks.nan_check.max_loss = 50.0
    hook = NanCheckHook.from_config(cfg)
    assert (hook.max_loss, hook.check_state, hook.state_frequency) == (50.0, True, 7)
    cfg.hooks.nan_check.check_state = False
    cfg.hooks.nan_check.max_loss = None
    hook = NanCheckHook.from_config(cfg)
    assert (hook.max_loss, hook.check_state) == (None, False)


def test_a_diverged_finite_loss_stops_the_run() -> None:
    engine = train_engine(loss=torch.tensor(4e29), iteration=4, batches=4)
    NanCheckHook().attach(engine)
    with pytest.raises(DegenerateTrainingError) as error:
        engine.step(train=True)
    assert not isinstance(error.value, NonFiniteLossError)
    assert str(error.value).startswith(
        "loss is 4e+29 at train iteration 5, phase 3/6 (train), step 5/50, "
        "beyond hooks.nan_check.max_loss=1e+08"
    )


def test_a_loss_at_max_loss_passes_and_none_disables_the_bound() -> None:
    engine = train_engine(loss=torch.tensor(-100.0))
    NanCheckHook(max_loss=100.0).attach(engine)
    engine.step(train=True)
    unbounded = train_engine(loss=torch.tensor(1e30))
    NanCheckHook(max_loss=None).attach(unbounded)
    unbounded.step(train=True)
    assert (engine.state.iteration, unbounded.state.iteration) == (1, 1)


@pytest.mark.parametrize(
    "bad", [{"max_loss": 0.0}, {"max_loss": float("inf")}, {"state_frequency": -1}]
)
def test_refuses_bad_bounds_when_built(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        NanCheckHook(**bad)


def model_and_adam() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(3, 2)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_infinite_optimizer_state_stops_the_run_at_the_train_phase_end() -> None:
    model, optimizer = model_and_adam()
    engine = train_engine(loss=torch.tensor(1.0), base_model=model, optimizer=optimizer)
    NanCheckHook(check_frequency=10).attach(engine)
    engine.step(train=True)
    engine.fire_event(SSLEvents.ON_PHASE_END)  # healthy state passes
    optimizer.state[model[0].weight]["exp_avg_sq"][0, 1] = float("inf")
    engine.step(train=True)
    with pytest.raises(DegenerateTrainingError) as error:
        engine.fire_event(SSLEvents.ON_PHASE_END)
    assert str(error.value) == (
        "optimizer state 'exp_avg_sq' of 0.weight holds inf at the end of phase 3/6 (train), "
        "train iteration 2"
    )


def test_a_nan_weight_or_buffer_is_named() -> None:
    model, optimizer = model_and_adam()
    engine = train_engine(loss=torch.tensor(1.0), base_model=model, optimizer=optimizer)
    NanCheckHook(state_frequency=2).attach(engine)
    with torch.no_grad():
        model[1].running_var[0] = float("nan")
    engine.step(train=True)  # iteration 1: not a state check
    with pytest.raises(
        DegenerateTrainingError, match=r"^buffer 1.running_var holds NaN after train iteration 2$"
    ):
        engine.step(train=True)
    with torch.no_grad():
        model[1].running_var[0] = 1.0
        model[0].bias[1] = float("-inf")
    with pytest.raises(DegenerateTrainingError, match=r"^weight 0.bias holds inf after"):
        engine.step(train=True)
        engine.step(train=True)


def test_state_checks_are_skipped_in_test_phases_and_when_disabled() -> None:
    model, optimizer = model_and_adam()
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    engine = FakeEngine(
        loss=torch.tensor(1.0), phase_name="test", base_model=model, optimizer=optimizer
    )
    NanCheckHook(state_frequency=1).attach(engine)
    engine.step(train=False)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    quiet = train_engine(loss=torch.tensor(1.0), base_model=model, optimizer=optimizer)
    NanCheckHook(state_frequency=1, check_state=False).attach(quiet)
    quiet.step(train=True)
    quiet.fire_event(SSLEvents.ON_PHASE_END)
    assert (engine.state.batches, quiet.state.iteration) == (1, 1)


def test_a_stop_checks_the_state_before_its_checkpoint() -> None:
    model, optimizer = model_and_adam()
    engine = train_engine(loss=torch.tensor(1.0), base_model=model, optimizer=optimizer)
    NanCheckHook().attach(engine)
    engine.step(train=True)
    optimizer.state[model[0].bias]["exp_avg"][0] = float("nan")
    engine.state.stop_requested = "SIGTERM"
    with pytest.raises(
        DegenerateTrainingError,
        match="^optimizer state 'exp_avg' of 0.bias holds NaN "
        "before the checkpoint after train iteration 2$",
    ):
        engine.step(train=True)
    engine.state.stop_requested = None
    engine.state.stopped_by = "EarlyStopping"
    with pytest.raises(
        DegenerateTrainingError, match="when the run stopped after train iteration 2$"
    ):
        engine.fire_event(SSLEvents.ON_END)

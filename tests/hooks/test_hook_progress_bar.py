from __future__ import annotations

import io

import pytest
import torch

from hookbus import HOOKS, Config, FakeEngine, Priority, SSLEvents
from hookbus.hooks.progress_bar import ProgressBarHook, bar_description
from tests.hook_stubs import Phase

PLAN = [Phase(train=True, length=3), Phase(train=False, length=2)]


def run_phase(engine: FakeEngine, idx: int) -> None:
    state = engine.state
    phase = state.phases[idx]
    state.phase_idx, state.train, state.phase_length = idx, phase.train, phase.length
    state.train_phase_idx += phase.train
    state.batches = 0
    engine.fire_event(SSLEvents.ON_PHASE_START)
    for _ in range(phase.length):
        engine.step()
    engine.fire_event(SSLEvents.ON_PHASE_END)


def new_engine() -> FakeEngine:
    return FakeEngine(phases=PLAN, loss=torch.tensor(0.25))


def test_registered_with_priority() -> None:
    assert HOOKS.get("progress_bar") is ProgressBarHook
    assert ProgressBarHook().priority == Priority.REPORT
    assert ProgressBarHook().name == "progress_bar"


def test_from_config_sets_postfix_frequency_to_log_frequency() -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 5
    hook = ProgressBarHook.from_config(cfg)
    assert (hook.enabled, hook.postfix_frequency) == (None, 5)


def test_train_bar_counts_steps_with_epoch_in_description() -> None:
    stream = io.StringIO()
    engine = new_engine()
    ProgressBarHook(enabled=True, file=stream).attach(engine)
    run_phase(engine, 0)
    last = stream.getvalue().strip().split("\r")[-1]
    assert last.startswith("epoch 1/1: 100%")
    assert "3/3" in last


def test_test_bar_names_the_epoch_it_follows() -> None:
    stream = io.StringIO()
    engine = new_engine()
    ProgressBarHook(enabled=True, file=stream).attach(engine)
    run_phase(engine, 0)
    run_phase(engine, 1)
    assert stream.getvalue().strip().split("\r")[-1].startswith("test after epoch 1/1: 100%")


@pytest.mark.parametrize(
    ("train", "train_phase_idx", "count", "description"),
    [
        (True, 0, 40, "epoch 1/40"),
        (True, 39, 40, "epoch 40/40"),
        (False, 9, 40, "test after epoch 10/40"),
        (False, -1, 0, "test"),  # a test-only run
    ],
)
def test_bar_descriptions_count_epochs_from_one(
    train: bool, train_phase_idx: int, count: int, description: str
) -> None:
    assert bar_description(train, train_phase_idx, count) == description


def test_loss_postfix_only_every_postfix_frequency_steps() -> None:
    shown, hidden = io.StringIO(), io.StringIO()
    for stream, frequency in ((shown, 3), (hidden, 4)):
        engine = new_engine()
        ProgressBarHook(enabled=True, file=stream, postfix_frequency=frequency).attach(engine)
        run_phase(engine, 0)
    assert "loss=0.2500" in shown.getvalue()
    assert "loss=" not in hidden.getvalue()


def test_resumed_phase_starts_at_batches_done() -> None:
    stream = io.StringIO()
    engine = new_engine()
    ProgressBarHook(enabled=True, file=stream).attach(engine)
    engine.state.phase_idx, engine.state.phase_length, engine.state.batches = 0, 3, 2
    engine.fire_event(SSLEvents.ON_PHASE_START)
    assert "2/3" in stream.getvalue()
    engine.fire_event(SSLEvents.ON_END)


def test_auto_mode_draws_nothing_off_a_terminal() -> None:
    stream = io.StringIO()
    engine = new_engine()
    ProgressBarHook(file=stream).attach(engine)
    run_phase(engine, 0)
    assert stream.getvalue() == ""


def test_other_ranks_draw_nothing() -> None:
    stream = io.StringIO()
    engine = new_engine()
    engine.state.rank = 1
    ProgressBarHook(enabled=True, file=stream).attach(engine)
    run_phase(engine, 0)
    assert stream.getvalue() == ""


def test_exception_closes_the_open_bar() -> None:
    stream = io.StringIO()
    engine = new_engine()
    hook = ProgressBarHook(enabled=True, file=stream).attach(engine)
    engine.state.phase_length = 3
    engine.fire_event(SSLEvents.ON_PHASE_START)
    engine.step()
    engine.fire_event(SSLEvents.ON_EXCEPTION)
    assert stream.getvalue().endswith("\n")
    assert hook._bar is None

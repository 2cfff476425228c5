"""The trainer's engine behaves as ignite users expect: ignite's events and state,
filters that count firings, terminate(), exceptions, priorities, and the reverse
(hookbus hooks on a plain ignite engine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine, Events

from hookbus import FakeEngine, Hook, Priority, SSLEvents, SSLTrainer, prepare_engine
from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.meter_sync import MeterSyncHook
from hookbus.hooks.nan_check import NanCheckHook
from hookbus.hooks.timing import TimingHook
from tests.conftest import tiny_config
from tests.failure_hooks import TerminateAt

ROOT = Path(__file__).resolve().parents[2]
IGNITE_STEP_EVENTS = [
    Events.GET_BATCH_STARTED,
    Events.GET_BATCH_COMPLETED,
    Events.ITERATION_STARTED,
    Events.ITERATION_COMPLETED,
]


def trainer(run_dir: Path, *extra: Hook, **sections: dict) -> SSLTrainer:
    sections.setdefault("optimizer", {"num_epochs": 2, "warmup_epochs": 0})
    cfg = tiny_config(run_dir, **sections)
    return SSLTrainer(cfg, hooks=[MeterSyncHook(), CheckpointHook(run_dir), *extra])


def record(engine: Engine, events: list[Any], log: list[str]) -> None:
    for event in events:
        engine.add_event_handler(event, lambda _, name=event.name: log.append(name))


def test_ignite_events_fire_around_train_phases_and_steps_only(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", optimizer={"num_epochs": 1, "warmup_epochs": 0})
    log: list[str] = []
    record(run.engine, [*IGNITE_STEP_EVENTS, Events.STARTED, Events.COMPLETED], log)
    record(run.engine, [Events.EPOCH_STARTED, Events.EPOCH_COMPLETED], log)
    record(run.engine, [SSLEvents.ON_START, SSLEvents.ON_PHASE_START], log)
    record(run.engine, [SSLEvents.ON_STEP, SSLEvents.ON_PHASE_END, SSLEvents.ON_END], log)
    run.train()
    step = [*(event.name for event in IGNITE_STEP_EVENTS), "ON_STEP"]
    train = ["ON_PHASE_START", "EPOCH_STARTED", *step * 3, "EPOCH_COMPLETED", "ON_PHASE_END"]
    test = ["ON_PHASE_START", "ON_STEP", "ON_PHASE_END"]
    assert log == ["ON_START", "STARTED", *train, *test, "COMPLETED", "ON_END"]


def test_ignite_state_fields_mean_what_ignite_users_expect(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    seen: list[tuple] = []

    def look(engine: Engine) -> None:
        state = engine.state
        seen.append((state.epoch, state.iteration, state.output is state.loss))

    run.engine.add_event_handler(Events.ITERATION_COMPLETED, look)
    state = run.train()
    epochs_and_iterations = [(1, 1), (1, 2), (1, 3), (2, 4), (2, 5), (2, 6)]
    assert seen == [(epoch, iteration, True) for epoch, iteration in epochs_and_iterations]
    assert (state.max_epochs, state.epoch_length, state.epoch) == (2, 3, 2)
    assert state.batch is not None and state.dataloader is None  # released after the run
    assert set(state.times) == {"EPOCH_COMPLETED", "COMPLETED"}
    assert all(value > 0 for value in state.times.values())


def test_state_keeps_a_history_of_every_phase(tmp_path: Path) -> None:
    state = trainer(tmp_path / "run").train()
    assert [record["phase"] for record in state.history] == ["train", "test"] * 2
    assert [record["iteration"] for record in state.history] == [3, 3, 6, 6]
    assert "knn_top1" in state.history[1] and "knn_top1" in state.history[3]


@pytest.mark.parametrize(
    ("event", "firings"),
    [
        (SSLEvents.ON_FORWARD, 8),  # every step: 2 x (3 train + 1 test)
        (SSLEvents.ON_LOSS_AND_METER, 8),
        (SSLEvents.ON_STEP, 8),
        (SSLEvents.ON_BACKWARD, 6),  # train steps
        (SSLEvents.ON_UPDATE, 6),  # optimizer steps
        (SSLEvents.ON_PHASE_START, 4),
        (SSLEvents.ON_PHASE_END, 4),
    ],
)
def test_filters_count_the_firings_of_each_ssl_event(
    tmp_path: Path, event: SSLEvents, firings: int
) -> None:
    run = trainer(tmp_path / "run")
    every: list[int] = []
    once: list[int] = []
    counter = {"n": 0}

    def count(engine: Engine) -> None:
        counter["n"] += 1

    def every_third(engine: Engine) -> None:
        every.append(counter["n"])

    def second(engine: Engine) -> None:
        once.append(counter["n"])

    run.engine.add_event_handler(event, count)
    run.engine.add_event_handler(event(every=3), every_third)
    run.engine.add_event_handler(event(once=2), second)
    run.train()
    assert counter["n"] == firings
    assert every == list(range(3, firings + 1, 3))
    assert once == [2]


def test_optimizer_steps_count_on_update_with_accumulation(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", optimizer={"num_epochs": 2, "accumulate_steps": 2})
    seen: list[int] = []
    run.engine.add_event_handler(
        SSLEvents.ON_UPDATE(every=2), lambda e: seen.append(e.state.updates)
    )
    state = run.train()
    assert state.updates == 4  # 2 per phase of 3 batches: after batch 2 and at the phase end
    assert seen == [2, 4]


@pytest.mark.parametrize("event", [SSLEvents.ON_START, SSLEvents.ON_END, SSLEvents.ON_EXCEPTION])
def test_a_filter_on_a_once_only_event_is_refused_when_attached(event: SSLEvents) -> None:
    engine = FakeEngine()
    with pytest.raises(ValueError, match=f"{event.name} fires at most once"):
        engine.add_event_handler(event(every=2), lambda e: None)
    with pytest.raises(ValueError, match="EXCEPTION_RAISED fires at most once"):
        engine.add_event_handler(Events.EXCEPTION_RAISED(once=1), lambda e: None)


def test_engine_run_is_refused_with_what_to_call(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"call trainer.train\(\)"):
        trainer(tmp_path / "run").engine.run([1, 2, 3])


def test_engine_interrupt_is_refused_with_what_to_call() -> None:
    with pytest.raises(RuntimeError, match=r"call engine.terminate\(\)"):
        FakeEngine().interrupt()


def test_terminate_from_a_hook_ends_cleanly_and_counts_as_finished(tmp_path: Path) -> None:
    log: list[str] = []
    run = trainer(tmp_path / "run", TerminateAt(2))
    record(run.engine, [Events.TERMINATE, Events.COMPLETED, SSLEvents.ON_END], log)
    record(run.engine, [SSLEvents.ON_PHASE_END, Events.EPOCH_COMPLETED], log)
    state = run.train()
    assert log == ["TERMINATE", "COMPLETED", "ON_END"]
    assert (state.iteration, state.stopped_by) == (2, "terminate() in TerminateAt.on_step")
    assert re.match(
        r"stopped early by terminate\(\) in TerminateAt.on_step in phase 1/\d+ after step 2 ",
        state.summary["stopped"],
    )
    _, checkpoint = newest_valid_checkpoint(tmp_path / "run")
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (2, False)

    again = trainer(tmp_path / "run").train()
    assert again.iteration == 2 and again.history == []
    assert again.stopped_by == "terminate() in TerminateAt.on_step"


def test_a_stopped_run_goes_on_when_asked_and_ends_as_a_straight_run(tmp_path: Path) -> None:
    straight = trainer(tmp_path / "straight").train()
    trainer(tmp_path / "run", TerminateAt(2)).train()
    resumed = trainer(tmp_path / "run", trainer={"resume_stopped": True, "log_frequency": 1})
    state = resumed.train()
    assert state.iteration == 6 and state.stopped_by is None
    for name, weight in straight.base_model.state_dict().items():
        assert torch.equal(weight, state.base_model.state_dict()[name]), name


def test_terminate_epoch_ends_the_phase_and_the_run_goes_on(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    counts: list[int] = []
    run.engine.add_event_handler(Events.ITERATION_COMPLETED(once=1), lambda e: e.terminate_epoch())
    run.engine.add_event_handler(
        Events.TERMINATE_SINGLE_EPOCH, lambda e, iter_counter: counts.append(iter_counter)
    )
    state = run.train()
    assert counts == [1]
    assert [record["iteration"] for record in state.history] == [1, 1, 4, 4]
    assert state.stopped_by is None


@pytest.mark.parametrize(("skip", "completed"), [(False, [1, 2]), (True, [2])])
def test_terminate_epoch_fires_epoch_completed_unless_asked_to_skip_it(
    tmp_path: Path, skip: bool, completed: list[int]
) -> None:
    run = trainer(tmp_path / "run")
    epochs: list[int] = []
    phase_ends: list[int] = []
    run.engine.add_event_handler(
        Events.ITERATION_COMPLETED(once=1), lambda e: e.terminate_epoch(skip_epoch_completed=skip)
    )
    run.engine.add_event_handler(Events.EPOCH_COMPLETED, lambda e: epochs.append(e.state.epoch))
    run.engine.add_event_handler(
        SSLEvents.ON_PHASE_END, lambda e: phase_ends.append(e.state.phase_idx)
    )
    state = run.train()
    assert epochs == completed
    assert phase_ends == [0, 1, 2, 3]  # the phase ends as a completed one, either way
    assert [record["iteration"] for record in state.history] == [1, 1, 4, 4]


def test_exception_raised_handlers_see_the_error_and_never_swallow_it(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    seen: list[BaseException] = []
    run.engine.add_event_handler(Events.EXCEPTION_RAISED, lambda e, error: seen.append(error))

    def fail(engine: Engine) -> None:
        raise KeyError("boom")

    run.engine.add_event_handler(Events.ITERATION_COMPLETED(once=2), fail)
    with pytest.raises(KeyError, match="boom"):
        run.train()
    assert [type(error) for error in seen] == [KeyError]


def test_ignite_handlers_take_normal_priority_or_the_one_given(tmp_path: Path) -> None:
    engine = FakeEngine()
    order: list[str] = []

    class Late(Hook):
        priority = Priority.LAST

        def on_step(self, engine: Engine) -> None:
            order.append("hook LAST")

    class Early(Hook):
        priority = Priority.FIRST

        def on_step(self, engine: Engine) -> None:
            order.append("hook FIRST")

    Late().attach(engine)
    Early().attach(engine)
    engine.add_event_handler(SSLEvents.ON_STEP, lambda e: order.append("ignite NORMAL"))
    with engine.at_priority(Priority.LAST + 1, name="after everything"):
        engine.add_event_handler(SSLEvents.ON_STEP, lambda e: order.append("ignite LAST+1"))
    engine.fire_event(SSLEvents.ON_STEP)
    assert order == ["hook FIRST", "ignite NORMAL", "hook LAST", "ignite LAST+1"]


def test_a_plain_function_as_a_hook_says_what_to_pass(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run")
    with pytest.raises(TypeError, match=r"not a hookbus Hook: pass an instance of a Hook"):
        SSLTrainer(cfg, hooks=[print])


def test_hooks_on_a_plain_ignite_engine_after_prepare_engine() -> None:
    def step(engine: Engine, batch: Any) -> dict:
        engine.state.train, engine.state.phase_length = True, 4
        engine.state.loss = torch.tensor(float(batch))
        engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
        engine.state.batches += 1
        engine.state.local_iteration_num += 1
        engine.state.batch_time.append(0.01)
        engine.state.data_time.append(0.0)
        engine.fire_event(SSLEvents.ON_STEP)
        return {"loss": engine.state.loss}

    plain = Engine(step)
    with pytest.raises(ValueError, match=r"call hookbus.prepare_engine\(engine\) first"):
        TimingHook().attach(plain)
    prepare_engine(plain)
    timing = TimingHook().attach(plain)
    NanCheckHook(check_frequency=1).attach(plain)
    plain.state.phases = []
    plain.add_event_handler(Events.EPOCH_STARTED, lambda e: e.fire_event(SSLEvents.ON_PHASE_START))
    plain.add_event_handler(Events.EPOCH_COMPLETED, lambda e: e.fire_event(SSLEvents.ON_PHASE_END))
    state = plain.run([1.0, 2.0, 3.0, 4.0], max_epochs=1)
    assert state.iteration == 4 and state.local_iteration_num == 4
    assert timing.name == "timing" and state.data_wait_fraction == 0.0
    assert state.eta_seconds == pytest.approx(0.0)


def test_cli_terminate_exits_0_with_one_line_and_the_rerun_says_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = str(ROOT / "configs" / "simclr_digits.yaml")
    args = [
        "train",
        recipe,
        f"checkpoint.dir={tmp_path}",
        "optimizer.num_epochs=1",
        "model.backbone.width=8",
        "model.head.dims=[32,32,16]",
        "hooks.evaluation_report.enabled=false",
        "hooks.progress_bar.enabled=false",
        "hooks.tensorboard.enabled=false",
        "trainer.imports=[tests.failure_hooks]",
        "hooks.extra=[{name: terminate_at, params: {at_iteration: 2}}]",
        "-q",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    stopped = [line for line in out.splitlines() if line.startswith("stopped early")]
    assert len(stopped) == 1
    assert re.fullmatch(
        r"stopped early by terminate\(\) in TerminateAt.on_step in phase 1/\d+ after step 2 "
        r"of 5 \(train iteration 2\); the run counts as finished: run again with "
        r"trainer.resume_stopped=true to go on",
        stopped[0],
    )
    assert main(args) == 0
    assert "done: nothing left to train; the run was stopped early" in capsys.readouterr().out
    assert main([*args[:-2], "trainer.resume_stopped=true", "-q"]) == 0
    assert "5/5 in all" in capsys.readouterr().out


@pytest.mark.slow
def test_train_from_python_shows_the_log_on_the_console(tmp_path: Path) -> None:
    script = f"""
from tests.conftest import tiny_config
from hookbus import SSLTrainer, default_hooks
cfg = tiny_config(__import__("pathlib").Path({str(tmp_path / "run")!r}))
SSLTrainer(cfg).train()
SSLTrainer(cfg).train()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "run finished after 6 train iterations" in done.stdout
    assert "training already complete" in done.stdout
    assert "raise optimizer.num_epochs" in done.stdout


def test_a_filter_picks_the_test_phases_for_an_ignite_handler(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    ends: list[str] = []
    test_phases = SSLEvents.ON_PHASE_END(event_filter=lambda engine, _: not engine.state.train)
    run.engine.add_event_handler(test_phases, lambda engine: ends.append(engine.state.phase_name))
    run.train()
    assert ends == ["test", "test"]

"""ignite's handlers and metrics on ``SSLTrainer.engine``: each row of the table in
docs/guides/ignite-handlers.md, in a real short run on the tiny data.

The tiny config trains 3 steps per train phase and tests 1 step after each; two epochs
make the plan train, test, train, test (6 train iterations in all).
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.contrib.engines.common import setup_common_training_handlers
from ignite.engine import Engine, Events
from ignite.handlers import (
    Checkpoint,
    CosineAnnealingScheduler,
    DiskSaver,
    EarlyStopping,
    ModelCheckpoint,
    ProgressBar,
    TerminateOnNan,
    TimeLimit,
    Timer,
    global_step_from_engine,
)
from ignite.handlers.tensorboard_logger import (
    OptimizerParamsHandler,
    OutputHandler,
    TensorboardLogger,
)
from ignite.metrics import Average, Metric, MetricUsage, RunningAverage
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hookbus import Hook, SSLEvents, SSLTrainer
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.meter_sync import MeterSyncHook
from hookbus.hooks.metrics_json import METRICS_FILE, MetricsJsonHook
from tests.conftest import tiny_config


def trainer(run_dir: Path, *extra: Hook, epochs: int = 2) -> SSLTrainer:
    cfg = tiny_config(run_dir, optimizer={"num_epochs": epochs, "warmup_epochs": 0})
    hooks = [MeterSyncHook(), MetricsJsonHook(), CheckpointHook(run_dir), *extra]
    return SSLTrainer(cfg, hooks=hooks)


def metrics_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]


class PoisonLossAt(Hook):
    """Makes the step's loss NaN at one train iteration, after the backward pass."""

    def __init__(self, at_iteration: int) -> None:
        super().__init__()
        self.at_iteration = at_iteration

    def on_update(self, engine: Engine) -> None:
        if engine.state.iteration == self.at_iteration:
            engine.state.loss = torch.tensor(float("nan"))


class StepCounter(Metric):
    """Counts the steps between ``started`` and ``completed``."""

    def reset(self) -> None:
        self.count = 0

    def update(self, output: Any) -> None:
        self.count += 1

    def compute(self) -> float:
        return float(self.count)


def test_progress_bar_draws_each_train_phase_as_an_epoch(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    stream = io.StringIO()
    ProgressBar(persist=True, file=stream).attach(run.engine)
    run.train()
    drawn = stream.getvalue()
    assert "Epoch [1/2]" in drawn and "Epoch [2/2]" in drawn
    assert "3/3" in drawn


def test_progress_bar_on_ssl_events_is_refused_by_ignite_at_attach(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    with pytest.raises(ValueError, match="not in list"):
        ProgressBar().attach(
            run.engine, event_name=SSLEvents.ON_STEP, closing_event_name=SSLEvents.ON_PHASE_END
        )


def test_timer_times_the_train_iterations(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    timer = Timer(average=True).attach(
        run.engine,
        start=Events.STARTED,
        resume=Events.ITERATION_STARTED,
        pause=Events.ITERATION_COMPLETED,
        step=Events.ITERATION_COMPLETED,
    )
    run.train()
    assert timer.step_count == 6
    assert 0 < timer.value() < 5


def test_time_limit_ends_the_run_cleanly_after_the_step(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    limit = TimeLimit(limit_sec=1)
    limit.start_time -= 60  # as if the run had started a minute ago
    run.engine.add_event_handler(Events.ITERATION_COMPLETED, limit)
    state = run.train()
    assert state.iteration == 1
    assert state.stopped_by == "terminate() in TimeLimit.__call__"
    _, checkpoint = newest_valid_checkpoint(tmp_path / "run")
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (1, False)
    assert checkpoint["stopped_by"] == "terminate() in TimeLimit.__call__"


@pytest.mark.parametrize("event", [Events.ITERATION_COMPLETED, SSLEvents.ON_STEP])
def test_terminate_on_nan_stops_at_the_bad_step(tmp_path: Path, event: Any) -> None:
    run = trainer(tmp_path / "run", PoisonLossAt(4))
    run.engine.add_event_handler(event, TerminateOnNan())
    state = run.train()
    assert state.iteration == 4
    assert state.stopped_by == "terminate() in TerminateOnNan.__call__"
    assert [line["phase"] for line in metrics_lines(tmp_path / "run")] == ["train", "test"]


def test_early_stopping_ends_the_run_after_the_epoch_without_progress(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", epochs=4)
    stopper = EarlyStopping(patience=1, score_function=lambda engine: 1.0, trainer=run.engine)
    run.engine.add_event_handler(Events.EPOCH_COMPLETED, stopper)
    state = run.train()
    assert state.iteration == 6
    assert state.stopped_by == "terminate() in EarlyStopping.__call__"
    assert [record["phase"] for record in state.history] == ["train", "test", "train"]
    _, checkpoint = newest_valid_checkpoint(tmp_path / "run")
    assert (checkpoint["phase_idx"], checkpoint["phase_done"]) == (2, True)


def test_model_checkpoint_names_files_by_epoch(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    state = run.setup()
    saver = ModelCheckpoint(
        tmp_path / "models",
        "ssl",
        n_saved=None,
        global_step_transform=global_step_from_engine(run.engine),
    )
    run.engine.add_event_handler(Events.EPOCH_COMPLETED, saver, {"model": state.base_model})
    run.train()
    assert sorted(path.name for path in (tmp_path / "models").iterdir()) == [
        "ssl_model_1.pt",
        "ssl_model_2.pt",
    ]


def test_checkpoint_of_the_trainer_round_trips(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    state = run.setup()
    saver = Checkpoint(
        {"trainer": run.engine, "model": state.base_model},
        DiskSaver(tmp_path / "ignite", require_empty=False),
        n_saved=None,
    )
    run.engine.add_event_handler(Events.EPOCH_COMPLETED, saver)
    run.train()
    (last,) = [p for p in (tmp_path / "ignite").iterdir() if p.name.endswith("_6.pt")]
    again = trainer(tmp_path / "other")
    fresh = again.setup()
    Checkpoint.load_objects(
        {"trainer": again.engine, "model": fresh.base_model}, torch.load(last, weights_only=True)
    )
    assert (again.engine.state.iteration, again.engine.state.epoch) == (6, 2)
    for name, weight in state.base_model.state_dict().items():
        assert torch.equal(weight, fresh.base_model.state_dict()[name]), name


def test_a_param_scheduler_drives_the_learning_rate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class RecordLr(Hook):
        def __init__(self) -> None:
            super().__init__()
            self.rates: list[float] = []

        def on_update(self, engine: Engine) -> None:
            self.rates.append(engine.state.optimizer.param_groups[0]["lr"])

    recorder = RecordLr()
    run = trainer(tmp_path / "run", recorder)
    state = run.setup()
    scheduler = CosineAnnealingScheduler(state.optimizer, "lr", 0.5, 0.1, cycle_size=6)
    run.engine.add_event_handler(Events.ITERATION_STARTED, scheduler)
    with caplog.at_level(logging.INFO, logger="hookbus"):
        run.train()
    expected = CosineAnnealingScheduler.simulate_values(
        6, param_name="lr", start_value=0.5, end_value=0.1, cycle_size=6
    )
    assert recorder.rates == pytest.approx([value for _, value in expected])
    assert state.lr_scheduler == "CosineAnnealingScheduler"
    assert "set by the CosineAnnealingScheduler attached to the engine" in caplog.text


def test_tensorboard_logger_writes_the_loss_and_lr_by_iteration(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    state = run.setup()
    board = TensorboardLogger(log_dir=tmp_path / "tb")
    board.attach(
        run.engine,
        OutputHandler(tag="training", output_transform=lambda loss: {"loss": loss}),
        Events.ITERATION_COMPLETED,
    )
    board.attach(run.engine, OptimizerParamsHandler(state.optimizer), Events.ITERATION_STARTED)
    run.train()
    board.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [event.step for event in events.Scalars("training/loss")] == [1, 2, 3, 4, 5, 6]
    assert [event.step for event in events.Scalars("lr/group_0")] == [1, 2, 3, 4, 5, 6]


def test_running_average_of_the_loss_is_recorded_with_the_train_phases(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    RunningAverage(output_transform=lambda loss: loss).attach(run.engine, "running_loss")
    run.train()
    lines = metrics_lines(tmp_path / "run")
    assert all("running_loss" in line for line in lines if line["train"])
    assert all("running_loss" not in line for line in lines if not line["train"])


def test_average_of_the_loss_equals_the_phase_mean_loss(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    Average().attach(run.engine, "average_loss")  # the default usage and transform
    run.train()
    train_lines = [line for line in metrics_lines(tmp_path / "run") if line["train"]]
    assert len(train_lines) == 2
    for line in train_lines:
        assert line["average_loss"] == pytest.approx(line["loss"], rel=1e-6)


def test_a_custom_metric_on_ssl_events_is_recorded_for_every_phase(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    usage = MetricUsage(
        started=SSLEvents.ON_PHASE_START,
        completed=SSLEvents.ON_PHASE_END,
        iteration_completed=SSLEvents.ON_STEP,
    )
    counter = StepCounter()
    counter.attach(run.engine, "steps", usage=usage)
    state = run.train()
    assert [line["steps"] for line in metrics_lines(tmp_path / "run")] == [3, 1, 3, 1]
    assert [record["steps"] for record in state.history] == [3, 1, 3, 1]


def test_setup_common_training_handlers(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    state = run.setup()
    setup_common_training_handlers(
        run.engine,
        to_save={"model": state.base_model},
        save_every_iters=2,
        output_path=str(tmp_path / "common"),
        output_names=["loss"],
        with_pbars=False,
        clear_cuda_cache=False,
    )
    run.train()
    saved = sorted(path.name for path in (tmp_path / "common").glob("*.pt"))
    assert saved == ["training_model_6.pt"]  # every 2 iterations, the newest kept
    assert "loss" in metrics_lines(tmp_path / "run")[0]

"""ignite habits that touch hookbus's bookkeeping: each works as in ignite or is refused
with what to do (the "ignite habits" table of docs/guides/ignite-handlers.md).

The tiny config trains 3 steps per train phase and tests 1 step after each; two epochs
make the plan train, test, train, test (6 train iterations, 6 optimizer steps).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.contrib.engines.common import setup_common_training_handlers
from ignite.engine import Engine, Events
from ignite.handlers import (
    BasicTimeProfiler,
    Checkpoint,
    DiskSaver,
    FastaiLRFinder,
    HandlersTimeProfiler,
    ModelCheckpoint,
    global_step_from_engine,
)
from ignite.metrics import Average, Metric, MetricUsage, RunningAverage

from hookbus import FakeEngine, Hook, Priority, SSLEvents, SSLTrainer, prepare_engine
from hookbus.engine.bus.metric_names import RECORD_KEYS, taken_metric_names
from hookbus.engine.bus.phases import Phase
from hookbus.engine.checkpoint.checkpoint_io import list_checkpoints
from hookbus.engine.errors import ConfigError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.log import LogHook
from hookbus.hooks.meter_sync import MeterSyncHook
from hookbus.hooks.metrics_json import METRICS_FILE, MetricsJsonHook
from hookbus.testing import tiny_config


class Recorder(Hook):
    """Counts optimizer steps, keeps each phase's mean loss and each step's batch."""

    priority = Priority.FIRST + 20  # after the meter sync, before the reports

    def __init__(self) -> None:
        super().__init__()
        self.updates = 0
        self.phase_losses: list[float] = []
        self.batches: list[Any] = []
        self.rates: list[float] = []

    def on_forward(self, engine: Engine) -> None:
        self.batches.append(engine.state.last_batch)

    def on_update(self, engine: Engine) -> None:
        self.updates += 1
        self.rates.append(engine.state.optimizer.param_groups[0]["lr"])

    def on_phase_end(self, engine: Engine) -> None:
        self.phase_losses.append(engine.state.phase_loss)


def trainer(run_dir: Path, *extra: Hook, epochs: int = 2) -> SSLTrainer:
    cfg = tiny_config(
        run_dir,
        optimizer={"num_epochs": epochs, "warmup_epochs": 0},
        checkpoint={"change_finished": True},  # a run of more epochs goes on from a shorter one
    )
    hooks = [MeterSyncHook(), MetricsJsonHook(), CheckpointHook(run_dir), *extra]
    return SSLTrainer(cfg, hooks=hooks)


def metrics_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]


def same_weights(one: torch.nn.Module, other: torch.nn.Module) -> bool:
    theirs = other.state_dict()
    return all(torch.equal(weight, theirs[name]) for name, weight in one.state_dict().items())


# ignite-style resume ------------------------------------------------------------------


def ignite_checkpoints(tmp_path: Path) -> dict[int, Path]:
    """An ignite Checkpoint of the trainer, model and optimizer at each epoch's end."""
    run = trainer(tmp_path / "first")
    state = run.setup()
    saver = Checkpoint(
        {"trainer": run.engine, "model": state.base_model, "optimizer": state.optimizer},
        DiskSaver(tmp_path / "ignite", require_empty=False),
        n_saved=None,
    )
    run.engine.add_event_handler(Events.EPOCH_COMPLETED, saver)
    run.train()
    files = sorted((tmp_path / "ignite").iterdir())
    return {int(path.stem.rsplit("_", 1)[1]): path for path in files}


def load_ignite(run: SSLTrainer, path: Path, *, with_trainer: bool = True) -> None:
    state = run.state
    objects: dict[str, Any] = {"model": state.base_model, "optimizer": state.optimizer}
    if with_trainer:
        objects["trainer"] = run.engine
    Checkpoint.load_objects(objects, torch.load(path, weights_only=True))


def test_ignite_resume_with_the_trainer_is_refused_before_anything_trains(tmp_path: Path) -> None:
    saved = ignite_checkpoints(tmp_path)
    recorder = Recorder()
    run = trainer(tmp_path / "second", recorder)
    run.setup()
    load_ignite(run, saved[3])
    with pytest.raises(ConfigError, match="loaded at train iteration 3") as refused:
        run.train()
    assert "hookbus resumes a run from its own checkpoints" in str(refused.value)
    assert "without 'trainer', for a warm start" in str(refused.value)
    assert recorder.updates == 0
    assert not (tmp_path / "second" / "config.yaml").exists()
    assert list_checkpoints(tmp_path / "second") == []


def test_ignite_resume_loaded_before_setup_is_refused_too(tmp_path: Path) -> None:
    saved = ignite_checkpoints(tmp_path)
    run = trainer(tmp_path / "second")
    run.engine.load_state_dict(torch.load(saved[6], weights_only=True)["trainer"])
    with pytest.raises(ConfigError, match="loaded at train iteration 6"):
        run.train()


def test_engine_load_state_dict_is_refused_like_load_objects() -> None:
    engine_state = {"iteration": 4, "epoch_length": 3, "max_epochs": 2}
    run = trainer(Path(__import__("tempfile").mkdtemp()) / "run")
    run.setup()
    run.engine.load_state_dict(engine_state)
    with pytest.raises(ConfigError, match="from a fresh start"):
        run.train()


def test_loading_the_model_and_optimizer_alone_is_a_warm_start(tmp_path: Path) -> None:
    saved = ignite_checkpoints(tmp_path)
    recorder = Recorder()
    run = trainer(tmp_path / "second", recorder)
    run.setup()
    load_ignite(run, saved[3], with_trainer=False)
    state = run.train()
    assert (recorder.updates, state.iteration) == (6, 6)  # the whole plan, on the weights


def test_ignite_counters_at_hookbus_resume_point_go_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = trainer(run_dir, epochs=1)
    state = first.setup()
    saver = Checkpoint(
        {"trainer": first.engine, "model": state.base_model},
        DiskSaver(tmp_path / "ignite", require_empty=False),
    )
    first.engine.add_event_handler(Events.EPOCH_COMPLETED, saver)
    first.train()
    (path,) = (tmp_path / "ignite").iterdir()
    recorder = Recorder()
    again = trainer(run_dir, recorder, epochs=2)
    again.setup()  # resumes hookbus's checkpoint at iteration 3
    Checkpoint.load_objects(
        {"trainer": again.engine, "model": again.state.base_model},
        torch.load(path, weights_only=True),
    )
    state = again.train()
    assert (recorder.updates, state.iteration, state.updates) == (3, 6, 6)
    assert (state.max_epochs, state.epoch_length) == (2, 3)


# metric names that collide with hookbus's records ------------------------------------


def test_phase_record_sets_exactly_the_record_keys() -> None:
    engine = FakeEngine(phase_name="train")
    assert tuple(engine.state.phase_record()) == RECORD_KEYS


@pytest.mark.parametrize("attach", ["running_average", "common_handlers", "average"])
def test_an_ignite_metric_named_loss_is_kept_apart_from_the_mean_loss(
    tmp_path: Path, attach: str, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        if attach == "running_average":
            RunningAverage(output_transform=lambda loss: loss).attach(run.engine, "loss")
        elif attach == "average":
            Average().attach(run.engine, "loss")
        else:
            setup_common_training_handlers(
                run.engine, output_names=["loss"], with_pbars=False, clear_cuda_cache=False
            )
    assert "recorded as 'ignite/loss'" in caplog.text
    state = run.train()
    lines = metrics_lines(tmp_path / "run")
    assert [line["loss"] for line in lines] == pytest.approx(recorder.phase_losses)
    assert [record["loss"] for record in state.history] == pytest.approx(recorder.phase_losses)
    assert all("ignite/loss" in line for line in lines if line["train"])
    assert all("ignite/loss" in record for record in state.history if record["train"])


def test_a_running_average_differs_from_the_mean_it_no_longer_replaces(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    RunningAverage(output_transform=lambda loss: loss, alpha=0.5).attach(run.engine, "loss")
    run.train()
    train = [line for line in metrics_lines(tmp_path / "run") if line["train"]]
    assert any(line["ignite/loss"] != pytest.approx(line["loss"]) for line in train)


class StepCount(Metric):
    def reset(self) -> None:
        self.count = 0

    def update(self, output: Any) -> None:
        self.count += 1

    def compute(self) -> float:
        return float(self.count)


def test_a_metric_on_ssl_events_named_iteration_keeps_the_counter(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    usage = MetricUsage(
        started=SSLEvents.ON_PHASE_START,
        completed=SSLEvents.ON_PHASE_END,
        iteration_completed=SSLEvents.ON_STEP,
    )
    StepCount().attach(run.engine, "iteration", usage=usage)
    run.train()
    lines = metrics_lines(tmp_path / "run")
    assert [line["iteration"] for line in lines] == [3, 3, 6, 6]
    assert [line["ignite/iteration"] for line in lines] == [3, 1, 3, 1]


@pytest.mark.parametrize("when", ["before_setup", "after_setup"])
def test_a_metric_named_like_a_meter_value_keeps_the_meters_value(
    tmp_path: Path, when: str
) -> None:
    run = trainer(tmp_path / "run")
    if when == "after_setup":
        run.setup()
    usage = MetricUsage(
        started=SSLEvents.ON_PHASE_START,
        completed=SSLEvents.ON_PHASE_END,
        iteration_completed=SSLEvents.ON_STEP,
    )
    StepCount().attach(run.engine, "knn_top1", usage=usage)
    run.train()
    tests = [line for line in metrics_lines(tmp_path / "run") if not line["train"]]
    assert [line["ignite/knn_top1"] for line in tests] == [1.0, 1.0]
    assert all(0.0 <= line["knn_top1"] <= 1.0 for line in tests)


def test_the_taken_names_are_the_record_keys_the_meters_values_and_the_hooks_metrics(
    tmp_path: Path,
) -> None:
    cfg = tiny_config(tmp_path / "run", hooks={"online_probe": {"enabled": True, "num_classes": 4}})
    run = SSLTrainer(cfg)
    assert "probe_top1" in taken_metric_names(run.state)
    assert "knn_top1" not in taken_metric_names(run.state)  # the meters come with setup
    run.setup()
    assert {"knn_top1", "probe_top1", *RECORD_KEYS} <= taken_metric_names(run.state)


def test_a_metric_with_its_own_name_keeps_it(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    RunningAverage(output_transform=lambda loss: loss).attach(run.engine, "running_loss")
    run.train()
    assert "running_loss" in metrics_lines(tmp_path / "run")[0]


# handlers put into the engine directly ------------------------------------------------


def test_basic_time_profiler_times_every_train_iteration(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    profiler = BasicTimeProfiler()
    profiler.attach(run.engine)
    run.engine.add_event_handler(Events.ITERATION_COMPLETED, lambda engine: None)
    run.train()
    results = profiler.get_results()
    assert profiler.processing_times.shape == (6,)
    assert bool((profiler.processing_times > 0).all())
    assert bool((profiler.dataflow_times > 0).all())
    assert results["processing_stats"]["total"] > 0
    assert results["event_handlers_stats"]["ITERATION_COMPLETED"]["total"] > 0
    assert results["event_handlers_stats"]["STARTED"]["total"] > 0


def test_handlers_time_profiler_times_ignite_and_hook_handlers(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    profiler = HandlersTimeProfiler()
    profiler.attach(run.engine)

    def after_step(engine: Engine) -> None:
        return None

    run.engine.add_event_handler(Events.ITERATION_COMPLETED, after_step)
    run.train()
    times = profiler.event_handlers_times
    (after,) = [name for name in times[Events.ITERATION_COMPLETED] if "after_step" in name]
    assert len(times[Events.ITERATION_COMPLETED][after]) == 6
    assert len(times[SSLEvents.ON_PHASE_END]["MeterSyncHook.on_phase_end"]) == 4
    assert len(profiler.processing_times) == 6 and len(profiler.dataflow_times) == 6
    rows = {row[0]: row for row in profiler.get_results()}
    assert rows[after][2] != "not triggered"


def test_a_handler_appended_to_the_list_directly_runs() -> None:
    engine = FakeEngine()
    calls: list[str] = []
    engine.add_event_handler(SSLEvents.ON_STEP, lambda e: calls.append("added"))
    engine.fire_event(SSLEvents.ON_STEP)
    engine._event_handlers[SSLEvents.ON_STEP].append((lambda: calls.append("appended"), (), {}))
    engine.fire_event(SSLEvents.ON_STEP)
    assert calls == ["added", "added", "appended"]


def test_a_handler_inserted_first_runs_first_and_stays_first() -> None:
    engine = FakeEngine()
    calls: list[str] = []
    engine.add_event_handler(SSLEvents.ON_STEP, lambda e: calls.append("normal"))
    first = (lambda: calls.append("inserted"), (), {})
    engine._event_handlers[SSLEvents.ON_STEP].insert(0, first)
    engine.add_event_handler(SSLEvents.ON_STEP, lambda e: calls.append("later"))
    engine.fire_event(SSLEvents.ON_STEP)
    assert calls == ["inserted", "normal", "later"]


def test_replaced_and_removed_entries_are_seen() -> None:
    engine = FakeEngine()
    calls: list[str] = []
    engine.add_event_handler(SSLEvents.ON_UPDATE, lambda e: calls.append("old"))
    engine._event_handlers[SSLEvents.ON_UPDATE][0] = (lambda: calls.append("new"), (), {})
    engine.fire_event(SSLEvents.ON_UPDATE)
    del engine._event_handlers[SSLEvents.ON_UPDATE][0]
    engine.fire_event(SSLEvents.ON_UPDATE)
    engine._event_handlers[SSLEvents.ON_UPDATE] = [(lambda: calls.append("list"), (), {})]
    engine.fire_event(SSLEvents.ON_UPDATE)
    assert calls == ["new", "list"]


def test_a_handler_appended_while_its_event_fires_runs_in_that_firing() -> None:
    engine = FakeEngine()
    calls: list[str] = []

    def adds_one(e: Engine) -> None:
        calls.append("first")
        e._event_handlers[SSLEvents.ON_STEP].append((lambda: calls.append("second"), (), {}))

    engine.add_event_handler(SSLEvents.ON_STEP, adds_one)
    engine.fire_event(SSLEvents.ON_STEP)
    assert calls == ["first", "second"]


# the batch a handler replaced ---------------------------------------------------------


def tagged(batch: dict[str, Any], tag: int) -> dict[str, Any]:
    return {**batch, "tag": torch.tensor(tag)}


@pytest.mark.parametrize(
    ("event", "first"), [(Events.GET_BATCH_COMPLETED, 0), (Events.ITERATION_STARTED, 1)]
)  # GET_BATCH_COMPLETED fires before the iteration is counted, as in ignite
def test_the_step_gets_the_batch_a_handler_put_in_state(
    tmp_path: Path, event: Any, first: int
) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    run.engine.add_event_handler(
        event, lambda e: setattr(e.state, "batch", tagged(e.state.batch, e.state.iteration))
    )
    run.train()
    train_steps = [batch for batch in recorder.batches if "tag" in batch]
    assert [int(batch["tag"]) for batch in train_steps] == list(range(first, first + 6))
    assert len(recorder.batches) == 8  # the test steps get the loader's batch


def test_a_replaced_batch_is_what_the_model_sees(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder, epochs=1)

    def zero_views(engine: Engine) -> None:
        batch = engine.state.batch
        engine.state.batch = {**batch, "views": [torch.zeros_like(v) for v in batch["views"]]}

    run.engine.add_event_handler(Events.GET_BATCH_COMPLETED, zero_views)
    run.train()
    train_batches = recorder.batches[:3]
    assert all(float(view.abs().sum()) == 0 for b in train_batches for view in b["views"])


# FastaiLRFinder -----------------------------------------------------------------------


def sweep(run: SSLTrainer, num_iter: int = 4) -> FastaiLRFinder:
    state = run.setup()
    finder = FastaiLRFinder()
    to_save = {"model": state.base_model, "optimizer": state.optimizer}
    with finder.attach(run.engine, to_save=to_save, num_iter=num_iter, end_lr=1.0):
        run.train()
    return finder


def test_the_lr_finder_sweep_sets_the_rates_and_writes_no_checkpoint(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    finder = sweep(run)
    history = finder.get_results()
    swept = [rates[0] for rates in history["lr"]]  # the first parameter group's
    assert len(swept) == 5  # iterations 1-5: the finder stops after the 5th
    # each optimizer step ran at a rate of the finder's sweep, rising (the config's
    # cosine schedule would fall)
    assert all(any(rate == pytest.approx(lr) for lr in swept) for rate in recorder.rates)
    assert recorder.rates == sorted(recorder.rates) and recorder.rates[-1] > 100 * swept[0]
    assert list_checkpoints(tmp_path / "run") == []
    assert not (tmp_path / "run" / METRICS_FILE).exists()


def test_train_after_the_lr_finder_trains_as_a_straight_run(tmp_path: Path) -> None:
    straight = trainer(tmp_path / "straight").train()
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    sweep(run)
    recorder.updates = 0
    state = run.train()
    assert (recorder.updates, state.iteration, state.stopped_by) == (6, 6, None)
    assert [line["iteration"] for line in metrics_lines(tmp_path / "run")] == [3, 3, 6, 6]
    assert same_weights(straight.base_model, state.base_model)
    again = trainer(tmp_path / "run").train()  # the next process: the run is complete
    assert again.history == [] and again.stopped_by is None


def test_the_next_run_on_the_directory_trains_normally_after_a_sweep(tmp_path: Path) -> None:
    sweep(trainer(tmp_path / "run"))
    recorder = Recorder()
    state = trainer(tmp_path / "run", recorder).train()
    assert (recorder.updates, state.iteration) == (6, 6)


# hookbus hooks on your own ignite engine ----------------------------------------------


def plain_engine() -> Engine:
    def step(engine: Engine, batch: Any) -> None:
        engine.fire_event(SSLEvents.ON_STEP)  # no counter advanced by the step

    return prepare_engine(Engine(step))


@pytest.mark.parametrize(("every", "expected"), [(2, [2, 4, 6]), (3, [3, 6])])
def test_a_filter_on_a_prepared_engine_counts_the_firings(every: int, expected: list) -> None:
    engine = plain_engine()
    seen: list[int] = []
    engine.add_event_handler(
        SSLEvents.ON_STEP(every=every), lambda e: seen.append(e.state.iteration)
    )
    engine.run(range(6), max_epochs=1)
    assert seen == expected


def test_once_on_a_prepared_engine_fires_once() -> None:
    engine = plain_engine()
    seen: list[int] = []
    engine.add_event_handler(SSLEvents.ON_STEP(once=4), lambda e: seen.append(e.state.iteration))
    engine.run(range(6), max_epochs=1)
    assert seen == [4]


@pytest.mark.parametrize(
    ("hook", "fields"),
    [
        (LogHook(log_frequency=1), "run_dir"),
        (CheckpointHook(Path("unused")), "phases"),
    ],
)
def test_a_hook_needing_run_fields_on_a_prepared_engine_names_them(hook: Hook, fields: str) -> None:
    engine = plain_engine()
    with pytest.raises(ValueError, match=f"needs the run-state field.*{fields}"):
        hook.attach(engine)


# engine.logger ------------------------------------------------------------------------


def test_engine_logger_lines_reach_the_run_log(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", LogHook(log_frequency=1), epochs=1)
    run.engine.add_event_handler(
        Events.ITERATION_COMPLETED(once=2), lambda e: e.logger.info("my handler at 2")
    )
    run.engine.add_event_handler(Events.ITERATION_COMPLETED(once=3), lambda e: e.terminate())
    run.train()
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "my handler at 2" in log
    assert "Terminate signaled" in log  # ignite's own line through engine.logger


def test_a_sweep_that_fails_puts_the_hooks_back(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run")
    state = run.setup()
    finder = FastaiLRFinder()

    def fail(engine: Engine) -> None:
        raise RuntimeError("sweep broke")

    run.engine.add_event_handler(Events.ITERATION_COMPLETED(once=2), fail)
    to_save = {"model": state.base_model, "optimizer": state.optimizer}
    sweeping = finder.attach(run.engine, to_save=to_save, num_iter=4)
    with pytest.raises(RuntimeError, match="sweep broke"), sweeping:
        run.train()
    names = run.hook_plan()["on_phase_end"]
    assert "checkpoint" in names and "metrics_json" in names


# set_data, a test phase's global step, and ignite's events on the FakeEngine -----------


def test_set_data_is_refused_when_called_and_the_phase_keeps_its_data(tmp_path: Path) -> None:
    recorder = Recorder()
    run = trainer(tmp_path / "run", recorder)
    other = [torch.zeros(8, 1, 8, 8)] * 6
    refusals: list[str] = []

    def switch(engine: Engine) -> None:
        try:
            engine.set_data(other)
        except RuntimeError as exc:
            refusals.append(str(exc))

    run.engine.add_event_handler(Events.ITERATION_COMPLETED(once=1), switch)
    state = run.train()
    assert len(refusals) == 1
    assert refusals[0].startswith("engine.set_data() is not supported by hookbus")
    assert "SSLTrainer(train_data=..., test_data=...)" in refusals[0]
    assert state.iteration == 6
    assert len(recorder.batches) == 8  # 6 train and 2 test steps, each on the run's data
    assert all(batch is not other[0] for batch in recorder.batches)
    assert state.dataloader is not other


def test_model_checkpoint_on_test_phases_names_files_by_epoch(tmp_path: Path) -> None:
    run = trainer(tmp_path / "run", epochs=3)
    state = run.setup()
    saver = ModelCheckpoint(
        tmp_path / "models",
        "ssl",
        n_saved=2,
        global_step_transform=global_step_from_engine(run.engine),
    )
    test_phases = SSLEvents.ON_PHASE_END(event_filter=lambda engine, _: not engine.state.train)
    run.engine.add_event_handler(test_phases, saver, {"model": state.base_model})
    every_second_phase: list[int] = []
    run.engine.add_event_handler(
        SSLEvents.ON_PHASE_END(every=2),
        lambda engine: every_second_phase.append(engine.state.phase_idx),
    )
    run.train()
    assert sorted(path.name for path in (tmp_path / "models").iterdir()) == [
        "ssl_model_2.pt",
        "ssl_model_3.pt",
    ]
    assert every_second_phase == [1, 3, 5]  # filters still count phases


def test_an_ignite_metric_computes_on_the_fake_engines_steps() -> None:
    engine = FakeEngine(phases=[Phase("train", True, 3), Phase("test", False, 1)])
    Average(output_transform=lambda loss: loss).attach(engine, "mean_output")
    seen: list[str] = []
    for event in (Events.EPOCH_STARTED, Events.GET_BATCH_STARTED, Events.GET_BATCH_COMPLETED):
        engine.add_event_handler(event, lambda _, name=event.name: seen.append(name))
    for event in (Events.ITERATION_STARTED, Events.ITERATION_COMPLETED, Events.EPOCH_COMPLETED):
        engine.add_event_handler(event, lambda _, name=event.name: seen.append(name))
    engine.begin_phase(0)
    for value in (1.0, 2.0, 6.0):
        engine.step(loss=torch.tensor(value), batch=value)
    assert engine.state.batch == 6.0
    engine.end_phase()
    assert engine.state.metrics["mean_output"] == pytest.approx(3.0)
    assert engine.state.history[0]["mean_output"] == pytest.approx(3.0)
    assert engine.state.epoch == 1
    assert seen == [
        "EPOCH_STARTED",
        *["GET_BATCH_STARTED", "GET_BATCH_COMPLETED", "ITERATION_STARTED", "ITERATION_COMPLETED"]
        * 3,
        "EPOCH_COMPLETED",
    ]
    engine.begin_phase(1)
    engine.step(loss=torch.tensor(9.0))
    engine.end_phase()
    assert len(seen) == 14  # a test phase fires no ignite event, as in the trainer

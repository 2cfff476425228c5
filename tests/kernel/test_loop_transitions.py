"""The loop's transitions on the run state, shared by the trainer, the standard step and
FakeEngine: begin phase, begin step, end step, end phase."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hookbus import FakeEngine, Hook, RunState, SSLEvents, SSLTrainer
from hookbus.engine.bus.phases import Phase, PhaseEnd
from hookbus.testing import tiny_config

PLAN = [Phase("train", True, 3), Phase("test", False, 2), Phase("train", True, 3)]


class StubMeter:
    """What the transitions read of a meter: the phase kinds it runs in, and reset()."""

    def __init__(self, *phases: str) -> None:
        self.phases = phases
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1


def mid_run_state(**fields: Any) -> RunState:
    """A run state after one train phase of PLAN, with step times and a loss sum left over."""
    values: dict[str, Any] = dict(
        phases=PLAN, phase_idx=0, train_phase_idx=0, iteration=3, batches=3,
        batch_time=[1.0], data_time=[0.5], metrics={"knn_top1": 0.9},
        loss_sum=torch.tensor(3.0),
    )  # fmt: skip
    return RunState(**(values | fields))


def test_a_fresh_train_phase_advances_the_train_phase_and_starts_empty() -> None:
    state = mid_run_state()
    phase = state.begin_phase(2, [])
    assert phase is PLAN[2]
    assert (state.phase_idx, state.train_phase_idx, state.train, state.phase_name) == (
        2, 1, True, "train"
    )  # fmt: skip
    assert (state.phase_length, state.batches, state.loss_sum) == (3, 0, None)
    assert (state.batch_time, state.data_time, state.metrics) == ([], [], {})


def test_a_test_phase_keeps_the_train_phase_index() -> None:
    state = mid_run_state()
    state.begin_phase(1, [])
    assert (state.phase_idx, state.train_phase_idx, state.train, state.phase_name) == (
        1, 0, False, "test"
    )  # fmt: skip
    assert state.phase_length == 2


def test_a_phase_keeps_the_meters_of_its_kind_and_resets_them() -> None:
    both, test_only = StubMeter("train", "test"), StubMeter("test")
    state = mid_run_state()
    state.begin_phase(2, [both, test_only])
    assert state.meters == [both]
    state.begin_phase(1, [both, test_only])
    assert state.meters == [both, test_only]
    assert (both.resets, test_only.resets) == (2, 1)


def test_a_phase_resumed_inside_keeps_the_restored_sums_and_counts_on() -> None:
    meter = StubMeter("train")
    restored = torch.tensor(2.0)
    state = mid_run_state(train_phase_idx=1, loss_sum=restored)
    state.begin_phase(2, [meter], batches_done=2)
    assert (state.train_phase_idx, state.batches, state.loss_sum) == (1, 2, restored)
    assert meter.resets == 0
    assert state.batch_time == []


def test_begin_step_counts_train_iterations_in_train_phases_only() -> None:
    state = RunState(train=True)
    state.begin_step()
    assert (state.iteration, state.local_iteration_num) == (1, 1)
    state.train = False
    state.begin_step()
    assert (state.iteration, state.local_iteration_num) == (1, 2)


def test_end_step_keeps_the_output_and_the_steps_times() -> None:
    state = RunState(batches=4, batch_time=[1.0], data_time=[0.25])
    state.end_step("output", batch_time=2.0, data_time=0.5)
    assert (state.output, state.batches) == ("output", 5)
    assert (state.batch_time, state.data_time) == ([1.0, 2.0], [0.25, 0.5])


def test_add_loss_keeps_the_loss_and_sums_the_phase() -> None:
    state = RunState()
    state.add_loss(torch.tensor(1.0))
    state.add_loss(torch.tensor(2.5))
    assert float(state.loss) == 2.5
    assert float(state.loss_sum) == 3.5


def test_count_update_counts_optimizer_steps() -> None:
    state = RunState(updates=7)
    state.count_update()
    assert state.updates == 8


def test_phase_record_has_the_phase_fields_and_metrics() -> None:
    state = RunState(
        phase_idx=3, phase_name="test", train=False, train_phase_idx=1, iteration=12,
        batches=2, loss_sum=torch.tensor(3.0), metrics={"knn_top1": 0.5},
    )  # fmt: skip
    assert state.phase_record() == {
        "phase_idx": 3, "phase": "test", "train": False, "train_phase_idx": 1,
        "iteration": 12, "loss": 1.5, "knn_top1": 0.5,
    }  # fmt: skip


def test_end_phase_adds_the_phase_record_to_the_history() -> None:
    state = mid_run_state()
    state.end_phase()
    state.end_phase()
    assert state.history == [state.phase_record(), state.phase_record()]
    assert state.history[0]["loss"] == 1.0


def test_start_over_puts_back_the_counters_of_a_fresh_start() -> None:
    state = mid_run_state(updates=3, local_iteration_num=3, stopped_by="x")
    state.epoch = 1
    state.history.append({"phase_idx": 0})
    state.start_over()
    assert (state.phase_idx, state.train_phase_idx, state.epoch) == (-1, -1, 0)
    assert (state.iteration, state.local_iteration_num, state.updates, state.batches) == (
        0, 0, 0, 0
    )  # fmt: skip
    assert (state.loss_sum, state.stopped_by, state.history, state.metrics) == (None, None, [], {})


def test_take_plan_sets_the_sizes_ignite_reads() -> None:
    state = RunState()
    state.max_iters = 5
    state.take_plan(PLAN, epoch_length=3)
    assert state.phases is PLAN
    assert (state.max_iterations, state.max_epochs, state.epoch_length) == (6, 2, 3)
    assert state.max_iters is None


# FakeEngine runs the same transitions -------------------------------------------------


class Recorder(Hook):
    """Records the counters each event sees."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, ...]] = []

    def _see(self, engine: Any, event: str) -> None:
        state = engine.state
        self.seen.append(
            (event, state.phase_idx, state.train_phase_idx, state.iteration,
             state.local_iteration_num, state.batches, state.updates, len(state.batch_time),
             len(state.data_time), len(state.history))
        )  # fmt: skip

    def on_phase_start(self, engine: Any) -> None:
        self._see(engine, "phase_start")

    def on_forward(self, engine: Any) -> None:
        self._see(engine, "forward")

    def on_update(self, engine: Any) -> None:
        self._see(engine, "update")

    def on_step(self, engine: Any) -> None:
        self._see(engine, "step")

    def on_phase_end(self, engine: Any) -> None:
        self._see(engine, "phase_end")


def test_fake_engine_phases_fire_around_the_transitions() -> None:
    engine = FakeEngine(phases=PLAN)
    recorder = Recorder().attach(engine)
    engine.begin_phase(0)
    engine.step(batch_time=2.0, data_time=0.5)
    engine.end_phase()
    assert recorder.seen == [
        ("phase_start", 0, 0, 0, 0, 0, 0, 0, 0, 0),
        ("forward", 0, 0, 1, 1, 0, 0, 0, 0, 0),
        ("update", 0, 0, 1, 1, 0, 1, 0, 0, 0),
        ("step", 0, 0, 1, 1, 1, 1, 1, 1, 0),
        ("phase_end", 0, 0, 1, 1, 1, 1, 1, 1, 0),
    ]
    assert (engine.state.batch_time, engine.state.data_time) == ([2.0], [0.5])
    assert len(engine.state.history) == 1


def test_fake_engine_step_keeps_a_given_loss_as_the_trainer_does() -> None:
    engine = FakeEngine(phases=PLAN)
    engine.begin_phase(0)
    engine.step(loss=torch.tensor(1.0))
    engine.step(loss=torch.tensor(2.0))
    assert engine.state.phase_loss == 1.5
    assert float(engine.state.output) == 2.0


def test_fake_engine_counts_as_the_trainer_does(tmp_path: Path) -> None:
    # the same plan run by the trainer and by hand on a FakeEngine: every event sees the
    # same counters
    cfg = tiny_config(tmp_path / "run", trainer={"test_model": True})
    real = Recorder()
    trainer = SSLTrainer(cfg, hooks=[real])
    trainer.train()
    engine = FakeEngine(phases=trainer.state.phases)
    fake = Recorder().attach(engine)
    for phase_idx, phase in enumerate(engine.state.phases):
        engine.begin_phase(phase_idx)
        for _ in range(phase.length):
            engine.step()
        engine.end_phase()
    assert fake.seen == real.seen
    assert [record["iteration"] for record in engine.state.history] == [
        record["iteration"] for record in trainer.state.history
    ]


def test_fake_engine_fires_the_step_events_in_the_trainers_order() -> None:
    engine = FakeEngine(phases=PLAN)
    fired: list[str] = []
    for event in SSLEvents:
        engine.add_event_handler(event, lambda _, name=event.value: fired.append(name))
    engine.begin_phase(1)
    engine.step()
    engine.end_phase()
    assert fired == ["on_phase_start", "on_forward", "on_loss_and_meter", "on_step", "on_phase_end"]


def test_only_a_stop_or_a_preemption_ends_the_run_at_a_phase_end() -> None:
    going_on = [ending for ending in PhaseEnd if ending.goes_on]
    assert going_on == [PhaseEnd.COMPLETED, PhaseEnd.ENDED_EARLY, PhaseEnd.ENDED_EARLY_QUIETLY]

"""The phase loop on a real ignite Engine: event order, exceptions, resume, hook state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

from hookbus import ConfigError, Hook, SSLEvents, SSLTrainer, default_hooks
from hookbus.engine.checkpoint.checkpoint_io import (
    POINTER_NAME,
    load_checkpoint,
    newest_valid_checkpoint,
    save_atomic,
)
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.meter_sync import MeterSyncHook
from tests.conftest import tiny_config


class EventRecorder(Hook):
    """Records (event, phase name) for every event."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def _record(self, engine: Engine, event: SSLEvents) -> None:
        self.events.append((event.value, engine.state.phase_name))

    def on_start(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_START)

    def on_phase_start(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_PHASE_START)

    def on_forward(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_FORWARD)

    def on_loss_and_meter(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_LOSS_AND_METER)

    def on_backward(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_BACKWARD)

    def on_update(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_UPDATE)

    def on_step(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_STEP)

    def on_phase_end(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_PHASE_END)

    def on_end(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_END)

    def on_exception(self, engine: Engine) -> None:
        self._record(engine, SSLEvents.ON_EXCEPTION)


class StepCounter(Hook):
    """A hook with state: counts train updates across resumes."""

    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    def on_update(self, engine: Engine) -> None:
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates = state["updates"]


class FailOnStep(Hook):
    def __init__(self, at_iteration: int) -> None:
        super().__init__()
        self.at_iteration = at_iteration

    def on_step(self, engine: Engine) -> None:
        if engine.state.iteration == self.at_iteration:
            raise RuntimeError(f"boom at {self.at_iteration}")


TRAIN_STEP = ["on_forward", "on_loss_and_meter", "on_backward", "on_update", "on_step"]
TEST_STEP = ["on_forward", "on_loss_and_meter", "on_step"]


def test_event_order_of_a_train_and_a_test_phase(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})
    recorder = EventRecorder()
    SSLTrainer(cfg, hooks=[recorder]).train()
    names = [event for event, _ in recorder.events]
    expected = (
        ["on_start", "on_phase_start"]
        + TRAIN_STEP * 3
        + ["on_phase_end", "on_phase_start"]
        + TEST_STEP
        + ["on_phase_end", "on_end"]
    )
    assert names == expected
    phases = [phase for event, phase in recorder.events if event == "on_phase_start"]
    assert phases == ["train", "test"]


def test_counters_after_two_epochs(tiny_cfg: Any) -> None:
    state = SSLTrainer(tiny_cfg, hooks=[]).train()
    assert state.iteration == 6
    assert state.local_iteration_num == 8
    assert state.train_phase_idx == 1
    assert state.phase_idx == 3
    assert state.batches == 1
    assert len(state.batch_time) == 1


def test_test_every_num_epochs_interleaves_test_phases(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run", optimizer={"num_epochs": 4}, trainer={"test_every_num_epochs": 2}
    )
    trainer = SSLTrainer(cfg, hooks=[])
    state = trainer.train()
    assert [p.kind for p in state.phases] == ["train", "train", "test", "train", "train", "test"]


def test_test_only_runs_one_test_phase(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", trainer={"test_only": True})
    recorder = EventRecorder()
    state = SSLTrainer(cfg, hooks=[recorder]).train()
    assert [e for e, _ in recorder.events].count("on_backward") == 0
    assert state.iteration == 0
    assert state.local_iteration_num == 1


def test_exception_reaches_caller_after_on_exception_handlers(tiny_cfg: Any) -> None:
    recorder = EventRecorder()
    with pytest.raises(RuntimeError, match="boom at 2"):
        SSLTrainer(tiny_cfg, hooks=[recorder, FailOnStep(2)]).train()
    names = [event for event, _ in recorder.events]
    assert names[-1] == "on_exception"
    assert "on_end" not in names
    assert names.count("on_update") == 2


def test_failing_on_exception_handler_does_not_hide_the_error(
    tiny_cfg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class BrokenHandler(Hook):
        def on_exception(self, engine: Engine) -> None:
            raise ValueError("handler broke")

    recorder = EventRecorder()
    with caplog.at_level("ERROR", logger="hookbus"), pytest.raises(RuntimeError, match="boom"):
        SSLTrainer(tiny_cfg, hooks=[BrokenHandler(), recorder, FailOnStep(1)]).train()
    assert recorder.events[-1][0] == "on_exception"
    [failure] = [r for r in caplog.records if "on_exception handler failed" in r.getMessage()]
    assert "RuntimeError('boom at 1')" in failure.getMessage()
    assert failure.exc_info is not None and str(failure.exc_info[1]) == "handler broke"


def test_exception_state_names_the_error(tiny_cfg: Any) -> None:
    trainer = SSLTrainer(tiny_cfg, hooks=[FailOnStep(1)])
    with pytest.raises(RuntimeError):
        trainer.train()
    assert isinstance(trainer.state.exception, RuntimeError)
    assert trainer.state.data_loaders == {}


def test_hook_plan_lists_handlers_in_priority_order(tiny_cfg: Any) -> None:
    trainer = SSLTrainer(tiny_cfg)
    plan = trainer.hook_plan()
    assert plan["on_phase_end"][0] == "meter_sync"
    assert plan["on_phase_end"][-1] == "checkpoint"
    assert plan["on_loss_and_meter"] == ["nan_check"]
    assert set(plan) == {event.value for event in SSLEvents}


def test_resume_trains_only_the_remaining_epoch(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = StepCounter()
    SSLTrainer(
        tiny_config(run, optimizer={"num_epochs": 1}),
        hooks=[first, MeterSyncHook(), CheckpointHook(run)],
    ).train()
    assert load_checkpoint(run / POINTER_NAME)["train_phase_idx"] == 0

    recorder, second = EventRecorder(), StepCounter()
    state = SSLTrainer(
        tiny_config(run, optimizer={"num_epochs": 2}, checkpoint={"change_finished": True}),
        hooks=[recorder, second, MeterSyncHook(), CheckpointHook(run)],
    ).train()
    assert state.resumed_from is not None
    assert [e for e, _ in recorder.events].count("on_update") == 3
    assert second.updates == 6  # 3 restored from the checkpoint + 3 new
    assert state.iteration == 6
    assert state.train_phase_idx == 1


def test_finished_run_says_so_and_runs_nothing(tmp_path: Path, caplog: Any) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1})
    SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    recorder = EventRecorder()
    with caplog.at_level("INFO", logger="hookbus"):
        SSLTrainer(cfg, hooks=[recorder, CheckpointHook(run)]).train()
    assert recorder.events == []
    assert "training already complete" in caplog.text
    assert "raise optimizer.num_epochs" in caplog.text
    assert caplog.records[-1].levelname == "WARNING"


def test_resume_refuses_a_changed_phase_plan(tmp_path: Path) -> None:
    run = tmp_path / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1}), hooks=[CheckpointHook(run)]).train()
    # Without test phases, the checkpoint's phase 1 (a test phase) would be a train phase.
    changed = tiny_config(run, optimizer={"num_epochs": 2}, trainer={"test_model": False})
    with pytest.raises(ConfigError, match="trainer.test_model: True -> False"):
        SSLTrainer(changed, hooks=[]).train()
    path, checkpoint = newest_valid_checkpoint(run)
    del checkpoint["config"]  # a checkpoint without its config: the phase kinds still tell
    save_atomic(checkpoint, path.resolve())
    with pytest.raises(ConfigError, match="test_every_num_epochs or trainer.test_model"):
        SSLTrainer(changed, hooks=[]).train()


def test_restored_weights_equal_the_saved_ones(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = tiny_config(run, optimizer={"num_epochs": 1})
    trained = SSLTrainer(cfg, hooks=[CheckpointHook(run)]).train()
    restored = SSLTrainer(cfg, hooks=[]).train()
    saved = trained.base_model.state_dict()
    assert restored.resumed_from is not None
    assert all(torch.equal(saved[k], v) for k, v in restored.base_model.state_dict().items())


def test_gradient_accumulation_steps_the_optimizer_every_k_batches(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1, "accumulate_steps": 2})
    recorder = EventRecorder()
    SSLTrainer(cfg, hooks=[recorder]).train()
    names = [e for e, _ in recorder.events]
    assert names.count("on_backward") == 3
    assert names.count("on_update") == 2  # after batch 2 and at the end of the phase


def test_bf16_autocast_trains(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        optimizer={"num_epochs": 1},
        model={"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}, "amp": {"enabled": True}},
    )
    state = SSLTrainer(cfg, hooks=[]).train()
    assert state.amp_dtype is torch.bfloat16
    assert torch.isfinite(state.loss)


def test_effective_config_is_written(tiny_cfg: Any) -> None:
    state = SSLTrainer(tiny_cfg, hooks=[]).train()
    text = (state.run_dir / "config.yaml").read_text()
    assert "tiny_test_images" in text
    assert "num_epochs: 2" in text


def test_fp16_autocast_trains_with_a_grad_scaler_saved_in_checkpoints(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        optimizer={"num_epochs": 1},
        model={
            "backbone": {"width": 4},
            "head": {"dims": [16, 16, 8]},
            "amp": {"enabled": True, "dtype": "fp16"},
        },
    )
    state = SSLTrainer(cfg, hooks=default_hooks(cfg)).train()
    assert state.amp_dtype is torch.float16
    assert isinstance(state.scaler, torch.amp.GradScaler)
    assert torch.isfinite(state.loss)
    saved = load_checkpoint(state.run_dir / POINTER_NAME)["scaler"]
    assert saved["scale"] == state.scaler.get_scale() > 0
    assert saved["_growth_tracker"] == state.scaler.state_dict()["_growth_tracker"]


def test_test_phases_run_without_autograd(tmp_path: Path) -> None:
    class GradMode(Hook):
        def __init__(self) -> None:
            super().__init__()
            self.seen: dict[bool, set[bool]] = {True: set(), False: set()}

        def on_forward(self, engine: Engine) -> None:
            embeddings = engine.state.last_output["embeddings"][0]
            self.seen[engine.state.train].add(embeddings.requires_grad)

    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})
    recorder = GradMode()
    SSLTrainer(cfg, hooks=[recorder]).train()
    assert recorder.seen == {True: {True}, False: {False}}


def test_auto_resume_off_starts_afresh_beside_old_checkpoints(tmp_path: Path) -> None:
    first = SSLTrainer(tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})).train()
    assert first.iteration == 3
    cfg = tiny_config(
        tmp_path / "run", optimizer={"num_epochs": 2}, checkpoint={"auto_resume": False}
    )
    recorder = EventRecorder()
    again = SSLTrainer(cfg, hooks=[*default_hooks(cfg), recorder]).train()
    assert again.resumed_from is None
    assert recorder.events.count(("on_phase_start", "train")) == 2  # none taken from disk
    assert again.iteration == 6
    assert load_checkpoint(again.run_dir / POINTER_NAME)["iteration"] == 6

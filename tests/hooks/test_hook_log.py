from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from hookbus import HOOKS, Config, FakeEngine, Priority, SSLEvents
from hookbus.hooks.log import LOG_FILE, LogHook, peak_memory_mb
from tests.hook_stubs import Phase

PLAN = [Phase(train=True, length=4), Phase(train=False, length=2), Phase(train=True, length=4)]


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    return FakeEngine(
        run_dir=tmp_path,
        phases=PLAN,
        phase_idx=0,
        phase_name="train",
        train_phase_idx=0,
        phase_length=4,
        max_iterations=8,
        loss=torch.tensor(0.5),
        lr=0.001,
    )


def log_lines(run_dir: Path) -> list[str]:
    return (run_dir / LOG_FILE).read_text().splitlines()


def test_registered_with_priority() -> None:
    assert HOOKS.get("log") is LogHook
    assert LogHook(log_frequency=1).priority == Priority.REPORT
    assert LogHook(log_frequency=1).name == "log"


def test_from_config_uses_trainer_log_frequency() -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 7
    assert LogHook.from_config(cfg).log_frequency == 7


def test_start_line_names_run_dir_resume_point_device_and_phases(engine: FakeEngine) -> None:
    engine.state.resumed_from = "ckpt/phase1.pt"
    LogHook(log_frequency=2).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.fire_event(SSLEvents.ON_END)
    first = log_lines(engine.state.run_dir)[0]
    assert f"run {engine.state.run_dir} (resumed from ckpt/phase1.pt)" in first
    assert "device cpu | world size 1 | 3 phases" in first


def test_step_line_every_log_frequency_train_iterations(engine: FakeEngine) -> None:
    LogHook(log_frequency=2).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    for seconds in (1.0, 3.0, 5.0):
        engine.step(train=True, batch_time=seconds)
    engine.fire_event(SSLEvents.ON_END)
    step_lines = [line for line in log_lines(engine.state.run_dir) if "| iter " in line]
    assert len(step_lines) == 1
    assert "phase 1/3 train | epoch 1/2 | iter 2/8 | loss 0.5000 | lr 1.00e-03" in step_lines[0]
    # no timing hook attached: the time left is unknown
    assert "| batch 2.000s | data 0% | eta -- | mem " in step_lines[0]


def test_step_line_has_the_gradient_norm_when_clipping_is_on(engine: FakeEngine) -> None:
    LogHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.step(train=True)  # clipping off: grad_norm is None
    engine.state.grad_norm = torch.tensor(12.3456)
    engine.step(train=True)
    engine.fire_event(SSLEvents.ON_END)
    first, second = [line for line in log_lines(engine.state.run_dir) if "| iter " in line]
    assert "grad" not in first
    assert "| lr 1.00e-03 | grad 12.3 | batch " in second


def test_no_step_lines_in_test_phases(engine: FakeEngine) -> None:
    LogHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.step(train=False)
    engine.fire_event(SSLEvents.ON_END)
    assert not [line for line in log_lines(engine.state.run_dir) if "| iter " in line]


def test_eta_and_data_wait_formatting(engine: FakeEngine) -> None:
    LogHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.state.eta_seconds = 3725.4
    engine.state.data_wait_fraction = 0.25
    engine.step(train=True)
    engine.fire_event(SSLEvents.ON_END)
    assert "| data 25% | eta 1:02:05 |" in log_lines(engine.state.run_dir)[1]


def test_phase_end_line_has_mean_loss_and_metrics(engine: FakeEngine) -> None:
    LogHook(log_frequency=100).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.state.batches = 4
    engine.state.loss_sum = torch.tensor(2.0)
    engine.state.metrics = {"knn_top1": 0.75}
    engine.state.data_wait_fraction = 0.034
    engine.fire_event(SSLEvents.ON_PHASE_END)
    engine.fire_event(SSLEvents.ON_END)
    line = log_lines(engine.state.run_dir)[1]
    assert line.endswith(
        "phase 1/3 train done | 4 steps | data wait 3.4% | mean loss 0.5000 | knn_top1 0.7500"
    )


def test_resumed_run_appends_to_log_file(engine: FakeEngine) -> None:
    for _ in range(2):
        hook = LogHook(log_frequency=1).attach(engine)
        engine.fire_event(SSLEvents.ON_START)
        engine.fire_event(SSLEvents.ON_END)
        hook.detach(engine)
    assert sum("fresh start" in line for line in log_lines(engine.state.run_dir)) == 2


def test_exception_closes_file_and_removes_handler(engine: FakeEngine) -> None:
    before = list(logging.getLogger("hookbus").handlers)
    LogHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.state.exception = RuntimeError("boom")
    engine.fire_event(SSLEvents.ON_EXCEPTION)
    logging.getLogger("hookbus").info("after the run")
    assert logging.getLogger("hookbus").handlers == before
    lines = log_lines(engine.state.run_dir)
    assert "ERROR run stopped in phase 1/3 at train iteration 0: RuntimeError('boom')" in lines[-1]


def test_other_ranks_log_nothing(engine: FakeEngine, caplog: pytest.LogCaptureFixture) -> None:
    engine.state.rank = 1
    LogHook(log_frequency=1).attach(engine)
    with caplog.at_level(logging.INFO, logger="hookbus"):
        engine.fire_event(SSLEvents.ON_START)
        engine.step(train=True)
        engine.fire_event(SSLEvents.ON_PHASE_END)
        engine.fire_event(SSLEvents.ON_END)
    assert caplog.records == []
    assert not (engine.state.run_dir / LOG_FILE).exists()


def test_unconfigured_logger_level_is_restored(engine: FakeEngine) -> None:
    logger = logging.getLogger("hookbus")
    logger.setLevel(logging.NOTSET)
    LogHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    assert logger.level == logging.INFO
    engine.fire_event(SSLEvents.ON_END)
    assert logger.level == logging.NOTSET


def test_peak_memory_is_cuda_allocation_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 3 * 2**20)
    assert peak_memory_mb("cuda") == 3.0


def test_peak_memory_is_peak_rss_on_cpu() -> None:
    assert peak_memory_mb("cpu") > 1.0

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch
from tensorboardX.proto.event_pb2 import Event

from hookbus import HOOKS, Config, FakeEngine, Priority, SSLEvents
from hookbus.hooks.tensorboard import TENSORBOARD_DIR, TensorBoardHook


def read_scalars(run_dir: Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in the event files, in file then write order."""
    scalars = []
    for path in sorted((run_dir / TENSORBOARD_DIR).glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            payload = data[offset + 12 : offset + 12 + length]  # skip the length's crc
            offset += 12 + length + 4  # and the payload's crc
            event = Event.FromString(payload)
            scalars += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return scalars


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    return FakeEngine(run_dir=tmp_path, phase_name="train", loss=torch.tensor(0.5), lr=0.25)


def test_registered_with_priority() -> None:
    assert HOOKS.get("tensorboard") is TensorBoardHook
    assert TensorBoardHook(log_frequency=1).priority == Priority.REPORT
    assert TensorBoardHook(log_frequency=1).name == "tensorboard"


def test_from_config_uses_trainer_log_frequency() -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 3
    assert TensorBoardHook.from_config(cfg).log_frequency == 3


def test_train_scalars_every_log_frequency_iterations(engine: FakeEngine) -> None:
    TensorBoardHook(log_frequency=2).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    for seconds in (1.0, 2.0, 3.0, 4.0, 5.0):
        engine.step(train=True, batch_time=seconds)
    engine.fire_event(SSLEvents.ON_END)
    assert read_scalars(engine.state.run_dir) == [
        ("train/loss", 2, 0.5),
        ("train/lr", 2, 0.25),
        ("train/batch_time", 2, 1.5),
        ("train/loss", 4, 0.5),
        ("train/lr", 4, 0.25),
        ("train/batch_time", 4, 3.5),
    ]


def test_gradient_norm_scalar_when_clipping_is_on(engine: FakeEngine) -> None:
    TensorBoardHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.state.grad_norm = torch.tensor(2.5)
    engine.step(train=True, batch_time=1.0)
    engine.fire_event(SSLEvents.ON_END)
    assert ("train/grad_norm", 1, 2.5) in read_scalars(engine.state.run_dir)


def test_no_step_scalars_in_test_phases(engine: FakeEngine) -> None:
    TensorBoardHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.step(train=False)
    engine.fire_event(SSLEvents.ON_END)
    assert read_scalars(engine.state.run_dir) == []


def test_phase_end_scalars_at_train_phase_index(engine: FakeEngine) -> None:
    TensorBoardHook(log_frequency=100).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    state = engine.state
    state.phase_name, state.train_phase_idx, state.batches = "test", 3, 4
    state.loss_sum, state.metrics = torch.tensor(1.0), {"knn_top1": 0.75}
    engine.fire_event(SSLEvents.ON_PHASE_END)
    engine.fire_event(SSLEvents.ON_EXCEPTION)
    assert read_scalars(state.run_dir) == [("test/loss_epoch", 3, 0.25), ("test/knn_top1", 3, 0.75)]


def test_other_ranks_write_nothing(engine: FakeEngine) -> None:
    engine.state.rank = 1
    TensorBoardHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.step(train=True)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    engine.fire_event(SSLEvents.ON_END)
    assert not (engine.state.run_dir / TENSORBOARD_DIR).exists()


def test_a_resume_within_the_same_second_keeps_the_earlier_events(
    engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorboardX.event_file_writer as event_file_writer

    class FrozenClock:
        @staticmethod
        def time() -> float:
            return 1_700_000_000.0

    monkeypatch.setattr(event_file_writer, "time", FrozenClock)
    for iteration in (0, 1):
        engine.state.iteration = iteration
        hook = TensorBoardHook(log_frequency=1).attach(engine)
        engine.fire_event(SSLEvents.ON_START)
        engine.step(train=True)
        engine.fire_event(SSLEvents.ON_END)
        hook.detach(engine)  # the next invocation's hook stands alone
    assert [(tag, step) for tag, step, _ in read_scalars(engine.state.run_dir)] == [
        ("train/loss", 1),
        ("train/lr", 1),
        ("train/batch_time", 1),
        ("train/loss", 2),
        ("train/lr", 2),
        ("train/batch_time", 2),
    ]

"""Asynchronous checkpoints: host snapshots, background writes, errors in the training thread."""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict, namedtuple
from pathlib import Path
from typing import Any

import pytest
import torch

import hookbus.hooks.checkpoint as checkpoint_hook_module
from hookbus import Config, FakeEngine, SSLEvents, SSLTrainer
from hookbus.engine.bus.phases import Phase
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, load_checkpoint
from hookbus.engine.checkpoint.checkpoint_writer import CheckpointWriter, snapshot_to_host
from hookbus.engine.errors import CheckpointWriteError
from hookbus.hooks.checkpoint import CheckpointHook
from tests.conftest import tiny_config


def _engine() -> FakeEngine:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(6, 4)).sum().backward()
    optimizer.step()  # optimizer state holds tensors too
    return FakeEngine(
        cfg=Config(),
        phases=[Phase("train", True, 4)],
        phase_idx=0,
        train_phase_idx=0,
        phase_length=4,
        base_model=model,
        model=model,
        loss_fn=torch.nn.Identity(),
        optimizer=optimizer,
    )


def _assert_same(left: Any, right: Any) -> None:
    assert type(left) is type(right)
    if isinstance(left, torch.Tensor):
        assert torch.equal(left, right)
    elif isinstance(left, dict):
        assert left.keys() == right.keys()
        for key in left:
            _assert_same(left[key], right[key])
    elif isinstance(left, list | tuple):
        assert len(left) == len(right)
        for a, b in zip(left, right, strict=True):
            _assert_same(a, b)
    else:
        assert left == right


def test_snapshot_does_not_follow_later_changes() -> None:
    weight = torch.ones(3)
    Pair = namedtuple("Pair", "a b")
    source = OrderedDict(w=weight, again=weight, items=[weight, 2], pair=Pair(weight, "x"))
    snapshot = snapshot_to_host(source)
    weight.add_(5)
    assert type(snapshot) is OrderedDict
    assert torch.equal(snapshot["w"], torch.ones(3))
    assert snapshot["again"] is snapshot["w"]  # a shared tensor is copied once
    assert snapshot["items"][1] == 2
    assert isinstance(snapshot["pair"], Pair)
    assert snapshot["pair"].b == "x"


def test_async_file_equals_a_synchronous_save_of_the_same_step(tmp_path: Path) -> None:
    engine = _engine()
    sync_hook = CheckpointHook(tmp_path / "sync")
    async_hook = CheckpointHook(tmp_path / "async", async_write=True)
    sync_hook.save(engine, phase_done=False)
    async_hook.save(engine, phase_done=False)
    with torch.no_grad():  # training goes on while the file is written
        for param in engine.state.base_model.parameters():
            param.add_(1.0)
    async_hook.wait()
    sync = load_checkpoint(tmp_path / "sync" / POINTER_NAME)
    written = load_checkpoint(tmp_path / "async" / POINTER_NAME)
    sync.pop("rng"), written.pop("rng")  # drawn at the moment of each save
    _assert_same(written, sync)


def test_a_second_request_waits_for_the_first_write() -> None:
    writer, log, release = CheckpointWriter(), [], threading.Event()

    def slow(snapshot: dict[str, torch.Tensor]) -> None:
        release.wait(timeout=10)
        log.append("first")

    writer.submit(slow, {"w": torch.zeros(1)})
    assert writer.busy
    threading.Timer(0.05, release.set).start()
    writer.submit(lambda snapshot: log.append("second"), {"w": torch.zeros(1)})
    assert log[0] == "first"
    writer.wait()
    assert log == ["first", "second"]
    assert not writer.busy


def test_a_write_error_is_raised_by_the_next_request_and_only_once() -> None:
    writer = CheckpointWriter()

    def fail(snapshot: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    writer.submit(fail, {})
    with pytest.raises(OSError, match="No space left"):
        writer.submit(lambda snapshot: None, {})
    writer.wait()  # the error was handed over; nothing left to raise


def test_a_write_error_is_raised_by_wait_and_raise_if_failed() -> None:
    writer = CheckpointWriter()
    writer.submit(lambda snapshot: 1 / 0, {})
    with pytest.raises(ZeroDivisionError):
        writer.wait()
    writer.submit(lambda snapshot: 1 / 0, {})
    writer._thread.join()  # type: ignore[union-attr]
    with pytest.raises(ZeroDivisionError):
        writer.raise_if_failed()


def test_hook_raises_a_background_write_error_at_phase_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(obj: Any, path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_hook_module, "save_atomic", full_disk)
    engine = _engine()
    hook = CheckpointHook(tmp_path, phase_frequency=0, iter_frequency=1, async_write=True)
    hook.attach(engine)
    engine.step()
    hook._writer._thread.join()  # type: ignore[union-attr]
    with pytest.raises(
        CheckpointWriteError, match="No space left on device; no checkpoint was written in .* yet"
    ):
        engine.fire_event(SSLEvents.ON_PHASE_END)


def test_async_run_fails_with_the_write_error_and_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_save = checkpoint_hook_module.save_atomic
    calls = []

    def second_write_fails(obj: Any, path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(obj, path)

    monkeypatch.setattr(checkpoint_hook_module, "save_atomic", second_write_fails)
    cfg = tiny_config(tmp_path / "run", checkpoint={"iter_frequency": 1, "async_write": True})
    with pytest.raises(CheckpointWriteError, match="No space left on device"):
        SSLTrainer(cfg).train()
    assert load_checkpoint(cfg.checkpoint.dir / POINTER_NAME)["iteration"] == 1


@pytest.mark.slow
def test_async_run_leaves_the_same_checkpoint_as_a_synchronous_one(tmp_path: Path) -> None:
    finals = []
    for name, async_write in (("sync", False), ("async", True)):
        cfg = tiny_config(
            tmp_path / name,
            optimizer={"num_epochs": 1},
            checkpoint={"iter_frequency": 1, "async_write": async_write},
        )
        SSLTrainer(cfg).train()
        finals.append(load_checkpoint(cfg.checkpoint.dir / POINTER_NAME))
    sync, written = finals
    for checkpoint in finals:
        checkpoint.pop("config")  # names its own run directory
        checkpoint["hooks"].pop("timing")  # measured seconds per step
    _assert_same(written, sync)


def test_a_later_snapshot_reuses_the_previous_buffers_with_new_values(tmp_path: Path) -> None:
    engine = _engine()
    hook = CheckpointHook(tmp_path, phase_frequency=0, keep_last=3, async_write=True)
    weight = engine.state.base_model[0].weight
    first_path = hook.save(engine, phase_done=False)
    hook.wait()
    with torch.no_grad():
        weight.add_(1.0)
    engine.state.batches = 2
    second_path = hook.save(engine, phase_done=False)
    hook.wait()
    first = load_checkpoint(first_path)["model"]["0.weight"]  # type: ignore[arg-type]
    second = load_checkpoint(second_path)["model"]["0.weight"]  # type: ignore[arg-type]
    assert torch.equal(second, weight.detach())
    assert torch.equal(first + 1.0, second)


def test_host_buffers_are_handed_out_again_after_their_write() -> None:
    writer = CheckpointWriter()
    addresses: list[int] = []
    writer.submit(lambda snapshot: addresses.append(snapshot["w"].data_ptr()), {"w": torch.ones(9)})
    writer.wait()
    writer.submit(
        lambda snapshot: addresses.append(snapshot["w"].data_ptr()), {"w": torch.zeros(9)}
    )
    writer.wait()
    assert addresses[0] == addresses[1]


@pytest.mark.parametrize("event", [SSLEvents.ON_END, SSLEvents.ON_EXCEPTION])
def test_end_and_exception_wait_for_the_write_and_raise_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, event: SSLEvents
) -> None:
    release = threading.Event()

    def slow_full_disk(obj: Any, path: Path) -> None:
        release.wait(timeout=10)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_hook_module, "save_atomic", slow_full_disk)
    engine = _engine()
    hook = CheckpointHook(tmp_path, async_write=True).attach(engine)
    hook.save(engine, phase_done=False)
    threading.Timer(0.05, release.set).start()
    with pytest.raises(CheckpointWriteError, match="No space left on device"):
        engine.fire_event(event)

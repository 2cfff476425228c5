"""Write failures outside the checkpoint path: the run lock, log.txt, metrics.json,
tensorboard/, curves.json and standard output.

A full disk (a small tmpfs filled up, or ``/dev/full``), a read-only file or a closed
pipe at any of them is one :class:`WriteFailure` naming the file (one line, exit status
1 on the command line), never a traceback or lines lost in silence; the run's
checkpoints are intact and the same command resumes. The tmpfs tests need to mount
one (root); elsewhere they are skipped with a message.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import hookbus.hooks.metrics_json as metrics_json
from hookbus import FakeEngine, SSLEvents
from hookbus.cli import EXIT_CLOSED_PIPE, main
from hookbus.console import guarded_stdout
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.checkpoint.run_curves import CURVES_FILE
from hookbus.engine.checkpoint.run_lock import LOCK_NAME, RunLock
from hookbus.engine.errors import LineHandler, WriteFailure, writing
from hookbus.hooks.log import LOG_FILE, LogHook
from hookbus.hooks.metrics_json import METRICS_FILE, MetricsJsonHook
from hookbus.hooks.summary_plot import SummaryPlotHook
from hookbus.hooks.tensorboard import TENSORBOARD_DIR, TensorBoardHook
from hookbus.testing import tiny_config
from hookbus.trainer import SSLTrainer

NO_SPACE = os.strerror(errno.ENOSPC)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled to the last byte: every new byte written fails."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:80]})")
    try:
        run_dir = mount / "run"
        run_dir.mkdir()
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            for size in (4096, 1):
                while True:
                    os.write(filler, b"\0" * size)
        except OSError:
            pass
        finally:
            os.close(filler)
        yield run_dir
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def read_only_disk(full_disk: Path) -> Path:
    """The tmpfs of :func:`full_disk`, emptied and mounted read-only."""
    (full_disk.parent / "filler").unlink()
    done = subprocess.run(["mount", "-o", "remount,ro", str(full_disk.parent)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount read-only ({done.stderr.decode().strip()[:80]})")
    return full_disk


def fake_engine(run_dir: Path) -> FakeEngine:
    engine = FakeEngine(run_dir=run_dir)
    engine.state.loss = torch.tensor(1.0)
    return engine


def finish_phase(engine: FakeEngine) -> None:
    state = engine.state
    state.phase_idx, state.phase_name, state.train, state.batches = 0, "train", True, 1
    state.loss_sum = torch.tensor(2.0)
    engine.fire_event(SSLEvents.ON_PHASE_END)


def no_space(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, NO_SPACE)


# --- the mechanism -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "No space left on device"),
        (errno.EROFS, "Read-only file system"),
        (errno.EACCES, "Permission denied"),
        (errno.EDQUOT, "Disk quota exceeded"),
    ],
)
def test_writing_names_the_file_and_the_cause(code: int, words: str) -> None:
    with pytest.raises(WriteFailure) as caught, writing("runs/x/log.txt", "what it means"):
        raise OSError(code, os.strerror(code))
    assert str(caught.value) == f"cannot write runs/x/log.txt: {words}; what it means"


def test_writing_lets_a_closed_pipe_through_as_itself() -> None:
    with pytest.raises(BrokenPipeError), writing("standard output"):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_line_handler_raises_once_then_drops_lines(tmp_path: Path) -> None:
    import logging

    stream = open("/dev/full", "w")  # noqa: SIM115 - the handler owns it
    handler = LineHandler(stream, "/dev/full")
    record = logging.LogRecord("hookbus", logging.INFO, "", 0, "a line", None, None)
    with pytest.raises(WriteFailure, match="cannot write /dev/full: No space left on device"):
        handler.emit(record)
    handler.emit(record)  # dropped: the run's on_exception handlers can still log elsewhere
    assert handler.failed


# --- each write site, on a full disk -----------------------------------------------------


@pytest.mark.slow
def test_the_run_lock_on_a_full_disk_says_nothing_was_trained(full_disk: Path) -> None:
    with pytest.raises(WriteFailure) as caught:
        RunLock.acquire(full_disk)
    assert str(caught.value) == (
        f"cannot write {full_disk / LOCK_NAME}: {NO_SPACE}; nothing was trained"
    )


def test_the_run_lock_in_a_read_only_folder_is_a_write_failure(tmp_path: Path) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        if os.access(read_only, os.W_OK):
            pytest.skip("root writes into a read-only folder; the tmpfs tests cover it")
        with pytest.raises(WriteFailure, match="Permission denied; nothing was trained"):
            RunLock.acquire(read_only)
    finally:
        read_only.chmod(0o755)


@pytest.mark.slow
def test_log_txt_on_a_full_disk_names_it(full_disk: Path) -> None:
    engine = fake_engine(full_disk)
    LogHook(log_frequency=1).attach(engine)
    with pytest.raises(WriteFailure) as caught:
        engine.fire_event(SSLEvents.ON_START)
        for _ in range(100):  # the first line may fit in a block the filler left
            engine.step(train=True)
    assert str(caught.value).startswith(f"cannot write {full_disk / LOG_FILE}: {NO_SPACE}; ")
    assert "run the same command again to resume" in str(caught.value)
    engine.fire_event(SSLEvents.ON_EXCEPTION)  # closes quietly, raises nothing more


@pytest.mark.slow
def test_metrics_json_on_a_full_disk_names_it(full_disk: Path) -> None:
    engine = fake_engine(full_disk)
    MetricsJsonHook().attach(engine)
    with pytest.raises(WriteFailure, match=f"cannot write {full_disk / METRICS_FILE}: "):
        for _ in range(100):
            finish_phase(engine)


def test_metrics_json_rewrite_at_resume_on_a_full_disk_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / METRICS_FILE).write_text('{"phase_idx": 0}\n{"phase_idx": 1}\n')
    monkeypatch.setattr(metrics_json, "write_text_atomic", no_space)
    engine = fake_engine(tmp_path)
    engine.state.phase_idx = 1
    MetricsJsonHook().attach(engine)
    with pytest.raises(WriteFailure, match=f"cannot write {tmp_path / METRICS_FILE}: No space"):
        engine.fire_event(SSLEvents.ON_PHASE_START)


def test_metrics_json_that_is_read_only_names_it(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    path.write_text("")
    path.chmod(0o444)
    if os.access(path, os.W_OK):
        pytest.skip("root writes into a read-only file")
    engine = fake_engine(tmp_path)
    MetricsJsonHook().attach(engine)
    with pytest.raises(WriteFailure, match="Permission denied"):
        finish_phase(engine)


@pytest.mark.slow
@pytest.mark.parametrize("hook", [LogHook(log_frequency=1), TensorBoardHook(log_frequency=1)])
def test_files_opened_at_start_on_a_read_only_disk_name_the_file(
    read_only_disk: Path, hook: LogHook | TensorBoardHook
) -> None:
    engine = fake_engine(read_only_disk)
    hook.attach(engine)
    with pytest.raises(WriteFailure, match=f"cannot write {read_only_disk}/.*: Read-only"):
        engine.fire_event(SSLEvents.ON_START)


@pytest.mark.slow
def test_the_run_lock_on_a_read_only_disk_names_it(read_only_disk: Path) -> None:
    with pytest.raises(WriteFailure, match=f"{LOCK_NAME}: Read-only file system; nothing"):
        RunLock.acquire(read_only_disk)


@pytest.mark.slow
def test_tensorboard_on_a_full_disk_names_its_event_file(full_disk: Path) -> None:
    engine = fake_engine(full_disk)
    TensorBoardHook(log_frequency=1).attach(engine)
    with pytest.raises(WriteFailure) as caught:
        engine.fire_event(SSLEvents.ON_START)
        finish_phase(engine)  # the phase end flushes the buffered records
    message = str(caught.value)
    assert message.startswith(f"cannot write {full_disk / TENSORBOARD_DIR}")
    assert NO_SPACE in message
    engine.fire_event(SSLEvents.ON_EXCEPTION)  # closes quietly


def test_tensorboard_failure_is_raised_in_the_hook_not_lost_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = fake_engine(tmp_path)
    hook = TensorBoardHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    assert hook._events is not None
    monkeypatch.setattr(hook._events, "flush", no_space)
    with pytest.raises(WriteFailure, match=r"tensorboard/events\.out\.tfevents\..*No space"):
        finish_phase(engine)


@pytest.mark.slow
def test_curves_json_on_a_full_disk_names_it(full_disk: Path) -> None:
    engine = fake_engine(full_disk)
    SummaryPlotHook(log_frequency=1).attach(engine)
    with pytest.raises(WriteFailure, match=f"cannot write {full_disk / CURVES_FILE}: "):
        finish_phase(engine)
    assert not [name for name in os.listdir(full_disk) if ".tmp-" in name]


# --- through the command line: one line, exit 1, nothing lost ----------------------------


def test_a_run_whose_metrics_json_fills_the_disk_resumes_with_every_phase_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync, synced = os.fsync, []

    def full_at_the_second_phase(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(METRICS_FILE):
            synced.append(fd)
            if len(synced) == 2:
                raise OSError(errno.ENOSPC, NO_SPACE)
        real_fsync(fd)

    run_dir = tmp_path / "run"
    monkeypatch.setattr(metrics_json.os, "fsync", full_at_the_second_phase)
    with pytest.raises(WriteFailure) as caught:
        SSLTrainer(tiny_config(run_dir)).train()
    monkeypatch.undo()
    assert str(caught.value) == (
        f"cannot write {run_dir / METRICS_FILE}: {NO_SPACE}; the run's checkpoints are "
        "intact: free space or fix the permission, then run the same command again to resume"
    )
    assert newest_valid_checkpoint(run_dir)[1]["phase_idx"] == 0
    SSLTrainer(tiny_config(run_dir)).train()
    rows = [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]
    assert [row["phase_idx"] for row in rows] == [0, 1, 2, 3]


def test_a_schema_to_a_full_device_is_one_line_naming_the_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = open("/dev/full", "w")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdout", full)
    try:
        status = main(["schema"])
    finally:
        monkeypatch.undo()
        full.close()
    assert status == 1
    err = capsys.readouterr().err.strip()
    assert err == f"hookbus schema: error: cannot write standard output: {NO_SPACE}"


def test_standard_output_to_a_full_device_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = open("/dev/full", "w")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdout", full)
    try:
        status = main(["recipes"])
    finally:
        monkeypatch.undo()
        full.close()
    assert status == 1
    err = capsys.readouterr().err.strip()
    # The listing fits the stream's buffer: the failure comes at the last flush.
    assert err == f"hookbus: error: cannot write standard output: {NO_SPACE}"


class ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


@pytest.mark.parametrize("argv", [["recipes"], ["recipes", "--show", "simclr_digits"], ["schema"]])
def test_standard_output_closed_early_ends_quietly(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    status = main(argv)
    monkeypatch.undo()
    assert status == EXIT_CLOSED_PIPE
    assert capsys.readouterr().err == ""


def test_guarded_stdout_puts_standard_output_back() -> None:
    before = sys.stdout
    with guarded_stdout() as guard:
        assert sys.stdout is guard
    assert sys.stdout is before


@pytest.mark.slow
def test_a_pipe_closed_early_ends_quietly_even_at_interpreter_exit() -> None:
    """``hookbus schema | head -c1``: the schema outgrows the pipe's buffer, so writes
    fail after ``head`` exits, and whatever is left is flushed at the interpreter's exit."""
    hookbus = Path(sys.executable).parent / "hookbus"
    done = subprocess.run(
        ["bash", "-c", f"{hookbus} schema | head -c1 > /dev/null; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr == ""  # no BrokenPipeError, no "Exception ignored"
    assert int(done.stdout) in (0, EXIT_CLOSED_PIPE)

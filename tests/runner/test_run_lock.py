"""The run lock: a second process on a run directory is refused at once, naming the
holder; a lock left by a killed process is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookbus import SSLTrainer, UserError
from hookbus.cli import main
from hookbus.engine.checkpoint.run_lock import LOCK_NAME, RunDirectoryBusy, RunLock
from hookbus.hooks.checkpoint import CheckpointHook
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from pathlib import Path
from hookbus.engine.checkpoint.run_lock import RunLock
RunLock.acquire(Path(sys.argv[1]))
print("locked", flush=True)
time.sleep(60)
"""


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """Another process holding the lock on ``run_dir`` until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    lock = RunLock.acquire(tmp_path / "run")
    assert f"pid {os.getpid()} on " in (tmp_path / "run" / LOCK_NAME).read_text()
    lock.release()
    assert not lock.held
    RunLock.acquire(tmp_path / "run").release()


@pytest.mark.slow
def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder = hold_lock(tmp_path / "run")
    try:
        with pytest.raises(RunDirectoryBusy, match=rf"in use by .*pid {holder.pid} on "):
            RunLock.acquire(tmp_path / "run")
        assert issubclass(RunDirectoryBusy, UserError)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    holder = hold_lock(tmp_path / "run")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1, "warmup_epochs": 0})
    state = SSLTrainer(cfg, hooks=[CheckpointHook(tmp_path / "run")]).train()
    assert state.iteration == 3


@pytest.mark.slow
def test_train_refuses_a_busy_directory_before_touching_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = hold_lock(tmp_path / "run")
    try:
        started = time.monotonic()
        args = ["train", str(ROOT / "configs" / "simclr_digits.yaml")]
        assert main([*args, f"checkpoint.dir={tmp_path / 'run'}", "-q"]) == 2
        assert time.monotonic() - started < 60
        err = capsys.readouterr().err.strip()
        assert err.startswith("hookbus train: error: run directory ")
        assert f"pid {holder.pid}" in err and len(err.splitlines()) == 1
        assert sorted(path.name for path in (tmp_path / "run").iterdir()) == [LOCK_NAME]
    finally:
        holder.kill()
        holder.wait()


def test_the_trainer_releases_the_lock_when_the_run_ends(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1, "warmup_epochs": 0})
    SSLTrainer(cfg, hooks=[CheckpointHook(tmp_path / "run")]).train()
    RunLock.acquire(tmp_path / "run").release()

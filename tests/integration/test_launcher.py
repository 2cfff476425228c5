"""`distributed.nproc_per_node`: ranks started on loopback, resumed, and stopped together."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import PREEMPTED_EXIT_STATUS
from hookbus.launcher import _supervise
from tests.kill_harness import ROOT, write_recipe


class FakeRank:
    """Stands in for a Popen: exits with ``code`` after ``polls`` polls, or never."""

    def __init__(self, code: int | None, polls: int = 0) -> None:
        self.code, self.polls, self.terminated = code, polls, False

    def poll(self) -> int | None:
        if self.terminated:
            return -15
        self.polls -= 1
        return self.code if self.polls < 0 else None

    def terminate(self) -> None:
        self.terminated = True

    def wait(self, timeout: float | None = None) -> int:
        return -15

    def kill(self) -> None:
        self.terminated = True


def _no_wait() -> None:
    """The fake ranks are no child processes: nothing to wait for between looks."""


def test_supervisor_returns_0_when_every_rank_succeeds() -> None:
    assert _supervise([FakeRank(0), FakeRank(0, polls=2)], grace_seconds=1, wait=_no_wait) == 0


def test_supervisor_reports_a_signal_as_a_shell_does() -> None:
    assert _supervise([FakeRank(-9)], grace_seconds=1, wait=_no_wait) == 137


def test_supervisor_stops_the_others_when_a_rank_fails() -> None:
    waiting = FakeRank(None)
    assert _supervise([waiting, FakeRank(3, polls=1)], grace_seconds=1, wait=_no_wait) == 3
    assert waiting.terminated


def _train(recipe: Path, run: Path, *overrides: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "hookbus",
        "train",
        str(recipe),
        f"checkpoint.dir={run}",
        "distributed.nproc_per_node=2",
        "distributed.backend=gloo",
        *overrides,
        "-q",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


MOCO = {"loss": {"name": "moco", "moco": {"queue_size": 32}}}
"""MoCo: besides the model, a key encoder and a queue resume, and shuffle-BN crosses ranks."""


@pytest.mark.slow
def test_two_ranks_train_and_resume_as_if_never_stopped(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=1, sections=MOCO)
    run = tmp_path / "run"
    reference = tmp_path / "reference"
    uninterrupted = _train(recipe, reference, "optimizer.num_epochs=3")
    assert uninterrupted.wait(timeout=180) == 0, uninterrupted.stdout.read()
    first = _train(recipe, run)
    assert first.wait(timeout=180) == 0, first.stdout.read()
    assert newest_valid_checkpoint(run)[1]["iteration"] == 1  # 24 images, 2 ranks, batch 8
    second = _train(recipe, run, "optimizer.num_epochs=3", "checkpoint.change_finished=true")
    assert second.wait(timeout=180) == 0, second.stdout.read()
    _, checkpoint = newest_valid_checkpoint(run)
    assert checkpoint["iteration"] == 3
    assert checkpoint["train_phase_idx"] == 2
    expected = newest_valid_checkpoint(reference)[1]
    assert expected["model"].keys() == checkpoint["model"].keys()
    for name, value in expected["model"].items():
        assert torch.equal(checkpoint["model"][name], value), name
    assert expected["hooks"].keys() == checkpoint["hooks"].keys()
    assert {"momentum_teacher", "key_queue"} <= expected["hooks"].keys()
    for hook, state in expected["hooks"].items():
        for name, value in _tensors(state):
            assert torch.equal(dict(_tensors(checkpoint["hooks"][hook]))[name], value), (hook, name)


def _tensors(state: object, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """The tensors in a nested state dict, by dotted path."""
    if isinstance(state, torch.Tensor):
        return [(prefix, state)]
    if isinstance(state, dict):
        return [pair for key, value in state.items() for pair in _tensors(value, f"{prefix}.{key}")]
    return []


def _child_with_rank(parent: int, rank: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and f"RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


@pytest.mark.slow
def test_a_killed_rank_ends_the_whole_run(tmp_path: Path) -> None:
    recipe, run = write_recipe(tmp_path / "recipe.yaml", epochs=2000), tmp_path / "run"
    launcher = _train(recipe, run, "distributed.timeout_seconds=30")
    deadline = time.monotonic() + 120
    while not (run / "config.yaml").exists():
        assert launcher.poll() is None and time.monotonic() < deadline, launcher.stdout.read()
        time.sleep(0.05)
    victim = _child_with_rank(launcher.pid, 1)
    assert victim is not None
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    status = launcher.wait(timeout=60)
    assert status == 128 + signal.SIGKILL
    assert time.monotonic() - killed_at < 30
    assert "rank 1 exited with status -9: stopping the other ranks" in launcher.stdout.read()


def _train_with_failure_hook(
    tmp_path: Path, hook: str, *overrides: str
) -> tuple[subprocess.Popen, Path]:
    """A 50-epoch 2-rank run in ``tmp_path/run`` with ``hook`` (a flow-style YAML mapping
    of a hook in tests/failure_hooks.py) added; the launcher process and the run dir."""
    recipe, run = write_recipe(tmp_path / "recipe.yaml", epochs=50), tmp_path / "run"
    launcher = _train(
        recipe,
        run,
        *overrides,
        "trainer.imports=[tests.tiny_data,tests.failure_hooks]",
        f"hooks.extra=[{hook}]",
    )
    return launcher, run


@pytest.mark.slow
def test_a_hung_rank_times_the_others_out_with_one_clear_line(tmp_path: Path) -> None:
    launcher, _ = _train_with_failure_hook(
        tmp_path,
        "{name: hang, params: {rank: 1, at_iteration: 2}}",
        "distributed.timeout_seconds=5",
    )
    started = time.monotonic()
    status = launcher.wait(timeout=120)
    output = launcher.stdout.read()
    assert status == 1, output
    assert time.monotonic() - started < 90
    assert (
        "hookbus train: error: rank 0: a collective across ranks failed (another rank died, "
        "or did not reach it within distributed.timeout_seconds): "
    ) in output
    assert "Timed out waiting 5000ms" in output
    assert "Traceback" not in output
    assert "rank 0 exited with status 1: stopping the other ranks" in output


@pytest.mark.slow
def test_a_stop_asked_of_one_rank_stops_both_after_the_same_step(tmp_path: Path) -> None:
    launcher, run = _train_with_failure_hook(
        tmp_path, "{name: request_stop, params: {rank: 1, at_iteration: 3}}"
    )
    status = launcher.wait(timeout=120)
    output = launcher.stdout.read()
    assert status == PREEMPTED_EXIT_STATUS, output
    where = r"in phase 3/\d+ after step 1 \(train iteration 3\)"
    assert re.search(rf"stopped by another rank {where}", output), output
    assert re.search(rf"stopped by SIGTERM {where}", output), output
    _, checkpoint = newest_valid_checkpoint(run)  # written by rank 0, which got no signal
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (3, False)


@pytest.mark.slow
def test_a_terminate_on_one_rank_ends_both_cleanly_at_the_same_boundary(tmp_path: Path) -> None:
    launcher, run = _train_with_failure_hook(
        tmp_path, "{name: terminate_at, params: {at_iteration: 3, rank: 1}}"
    )
    status = launcher.wait(timeout=120)
    output = launcher.stdout.read()
    assert status == 0, output
    where = r"in phase 3/\d+ after step 1 of 1 \(train iteration 3\)"
    assert re.search(rf"stopped early by terminate\(\) on another rank {where}", output)  # 0
    assert re.search(rf"stopped early by terminate\(\) in TerminateAt.on_step {where}", output)
    _, checkpoint = newest_valid_checkpoint(run)
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (3, True)
    assert checkpoint["stopped_by"] == "terminate() on another rank"


def test_rank_0_alone_gets_the_listening_socket_the_ranks_meet_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookbus import launcher

    started: list[tuple[dict[str, str], tuple[int, ...]]] = []

    class Started(FakeRank):
        def __init__(
            self, command: list[str], env: dict[str, str], pass_fds: tuple, **options: bool
        ) -> None:
            super().__init__(0)
            assert options == {"start_new_session": True}  # as torchrun starts its workers
            listening = socket.socket(fileno=os.dup(int(env[launcher.STORE_FD_VARIABLE])))
            with listening:
                bound = listening.getsockname()
                accepting = listening.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            assert (bound, accepting) == (("127.0.0.1", int(env["MASTER_PORT"])), 1)
            started.append((env, tuple(pass_fds)))

    monkeypatch.setattr(launcher.subprocess, "Popen", Started)
    monkeypatch.setattr(launcher, "_wait_for_a_child", lambda: None)
    assert launcher.launch_local(["train", "x.yaml"], 3) == 0
    fds = {env[launcher.STORE_FD_VARIABLE] for env, _ in started}
    assert len(fds) == 1
    assert [kept for _, kept in started] == [(int(fds.pop()),), (), ()]
    assert [env["RANK"] for env, _ in started] == ["0", "1", "2"]

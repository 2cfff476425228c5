"""Preemption: a signal checkpoints at the next step boundary; the run resumes exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer, default_hooks
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import PREEMPTED_EXIT_STATUS, PreemptedError
from hookbus.engine.process.preemption import PreemptionGuard
from tests.conftest import tiny_config
from tests.kill_harness import ROOT, command, final_parameters, write_recipe


class SignalAt(Hook):
    """Sends a signal to this process at one train iteration."""

    def __init__(self, iteration: int, signum: int = signal.SIGTERM) -> None:
        super().__init__()
        self.iteration = iteration
        self.signum = signum

    def on_update(self, engine: Engine) -> None:
        if engine.state.iteration == self.iteration:
            os.kill(os.getpid(), self.signum)


class _State:
    stop_requested: Any = None


def test_first_signal_sets_the_request_and_a_second_stops_at_once() -> None:
    state = _State()
    with PreemptionGuard(state):
        os.kill(os.getpid(), signal.SIGUSR1)
        assert state.stop_requested == "SIGUSR1"
        with pytest.raises(PreemptedError, match="second SIGTERM: stopped at once"):
            os.kill(os.getpid(), signal.SIGTERM)


def test_guard_restores_the_previous_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with PreemptionGuard(_State()):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_signal_checkpoints_at_the_step_boundary_and_resume_is_exact(
    tmp_path: Path, signum: int
) -> None:
    reference_cfg = tiny_config(tmp_path / "reference")
    reference = SSLTrainer(reference_cfg).train()

    cfg = tiny_config(tmp_path / "run")
    with pytest.raises(
        PreemptedError, match=rf"stopped by {signum.name} in phase 1/\d+ after step 2 "
    ):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(2, signum)]).train()
    _, checkpoint = newest_valid_checkpoint(cfg.checkpoint.dir)
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (2, False)

    resumed = SSLTrainer(cfg).train()
    expected = reference.base_model.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in resumed.base_model.state_dict().items())


@pytest.mark.slow
def test_preempted_process_exits_75_and_resumes(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=30)
    run = tmp_path / "run"
    started = time.time()
    process = subprocess.Popen(
        command(recipe, run), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    # The first checkpoint shows that training runs (the signal handlers are in place);
    # 89 more steps, each with a checkpoint, leave time for the signal on any machine.
    while not (run.is_dir() and any(run.glob("phase*.torch"))):
        assert process.poll() is None, process.stderr.read()
        assert time.time() < started + 120, "no checkpoint after 120 s"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == PREEMPTED_EXIT_STATUS, err
    assert "preempted: stopped by SIGTERM" in err
    assert "Traceback" not in err
    _, checkpoint = newest_valid_checkpoint(run)
    assert checkpoint["phase_done"] is False
    result = subprocess.run(command(recipe, run), cwd=ROOT, capture_output=True, timeout=300)
    assert result.returncode == 0
    assert newest_valid_checkpoint(run)[1]["iteration"] == 90  # 30 epochs x 3 steps
    assert final_parameters(run).keys() == checkpoint["model"].keys()


def test_run_state_has_no_stop_request_by_default() -> None:

    assert RunState().stop_requested is None


def test_mid_phase_resume_with_loader_workers_is_exact(tmp_path: Path) -> None:
    workers = {"name": "tiny_test_images", "image_size": 8, "num_workers": 2}
    reference = SSLTrainer(tiny_config(tmp_path / "reference", data=workers)).train()

    cfg = tiny_config(tmp_path / "run", data=workers)
    with pytest.raises(PreemptedError, match=r"in phase 3/\d+ after step 2 "):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(5)]).train()
    _, checkpoint = newest_valid_checkpoint(cfg.checkpoint.dir)
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (5, False)

    resumed = SSLTrainer(cfg).train()
    expected = reference.base_model.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in resumed.base_model.state_dict().items())

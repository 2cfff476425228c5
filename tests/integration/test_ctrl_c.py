"""Ctrl-C: a checkpoint at the next step, a line on how to resume, and an exact resume."""

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
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import INTERRUPTED_EXIT_STATUS, InterruptedRun
from hookbus.engine.process.preemption import CTRL_C, PreemptionGuard
from tests.conftest import tiny_config
from tests.kill_harness import (
    ROOT,
    command,
    final_parameters,
    run_here,
    run_to_completion,
    write_recipe,
)


class CtrlCAt(Hook):
    """Sends SIGINT to this process at one train iteration, as a terminal's Ctrl-C."""

    def __init__(self, iteration: int) -> None:
        super().__init__()
        self.iteration = iteration

    def on_update(self, engine: Engine) -> None:
        if engine.state.iteration == self.iteration:
            os.kill(os.getpid(), signal.SIGINT)


class _State:
    stop_requested: Any = None


def test_first_ctrl_c_asks_for_a_stop_and_a_second_stops_at_once() -> None:
    state = _State()
    with PreemptionGuard(state):
        os.kill(os.getpid(), signal.SIGINT)
        assert state.stop_requested == CTRL_C
        with pytest.raises(InterruptedRun, match="second Ctrl-C .*: stopped at once; run the same"):
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_checkpoints_at_the_step_and_the_resume_is_exact(tmp_path: Path) -> None:
    reference = SSLTrainer(tiny_config(tmp_path / "reference")).train()
    cfg = tiny_config(tmp_path / "run")
    with pytest.raises(
        InterruptedRun,
        match=r"stopped by Ctrl-C \(SIGINT\) in phase 1/\d+ after step 2 .*run the same command",
    ):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), CtrlCAt(2)]).train()
    _, checkpoint = newest_valid_checkpoint(cfg.checkpoint.dir)
    assert (checkpoint["iteration"], checkpoint["phase_done"]) == (2, False)

    resumed = SSLTrainer(cfg).train()
    expected = reference.base_model.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in resumed.base_model.state_dict().items())


@pytest.mark.slow
def test_a_real_ctrl_c_exits_130_and_the_same_command_resumes_to_the_same_weights(
    tmp_path: Path,
) -> None:
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=20)
    run_here(recipe, tmp_path / "reference")  # the same command, in this process
    run = tmp_path / "run"
    started = time.time()
    process = subprocess.Popen(
        command(recipe, run), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    while not (run.is_dir() and any(run.glob("phase*.torch"))):
        assert process.poll() is None, process.stderr.read()
        assert time.time() < started + 120, "no checkpoint after 120 s"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == INTERRUPTED_EXIT_STATUS, err
    assert "interrupted: stopped by Ctrl-C (SIGINT) in phase" in err
    assert "run the same command again to resume" in err
    assert "Traceback" not in err
    _, checkpoint = newest_valid_checkpoint(run)
    assert checkpoint["iteration"] < 60  # 20 epochs x 3 steps: stopped before the end

    run_to_completion(recipe, run)
    assert newest_valid_checkpoint(run)[1]["iteration"] == 60
    expected = final_parameters(tmp_path / "reference")
    resumed = final_parameters(run)
    assert expected.keys() == resumed.keys()
    assert all(torch.equal(expected[key], resumed[key]) for key in expected)

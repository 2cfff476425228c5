"""``srun hookbus train``: two tasks with the variables srun gives them, and no torchrun
variable, train as the launcher's two ranks do (gloo on loopback)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.process.slurm_env import PORT_BASE, PORT_SPAN
from tests.kill_harness import ROOT, write_recipe

TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
TORCHRUN_VARIABLES += ("MASTER_ADDR", "MASTER_PORT", "HOOKBUS_STORE_FD")


def _job_with_a_free_port() -> int:
    """A SLURM job id whose meeting port (``PORT_BASE + id % PORT_SPAN``) is free now."""
    for _ in range(100):
        job = random.randrange(1, 10**6)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", PORT_BASE + job % PORT_SPAN))
            except OSError:
                continue
        return job
    raise RuntimeError("no free port for a job id")


def _srun_task(task: int, job: int, command: list[str]) -> subprocess.Popen:
    """``command`` as task ``task`` of 2 on one node, with the variables srun sets."""
    env = {key: value for key, value in os.environ.items() if key not in TORCHRUN_VARIABLES}
    env.update(
        OMP_NUM_THREADS="1",
        SLURM_JOB_ID=str(job),
        SLURM_JOB_NODELIST="127.0.0.1",
        SLURM_STEP_NODELIST="127.0.0.1",
        SLURM_STEP_ID="0",
        SLURM_NTASKS="2",
        SLURM_STEP_NUM_TASKS="2",
        SLURM_STEP_TASKS_PER_NODE="2",
        SLURM_NODEID="0",
        SLURM_PROCID=str(task),
        SLURM_LOCALID=str(task),
    )
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _train(recipe: Path, run: Path, *overrides: str) -> list[str]:
    return [
        *(sys.executable, "-m", "hookbus", "train", str(recipe), f"checkpoint.dir={run}"),
        *("distributed.backend=gloo", *overrides, "-q"),
    ]


@pytest.mark.slow
def test_two_srun_tasks_train_as_the_launchers_two_ranks(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=2)
    srun_run, launched_run = tmp_path / "srun", tmp_path / "launcher"
    job = _job_with_a_free_port()
    tasks = [_srun_task(task, job, _train(recipe, srun_run)) for task in range(2)]
    launcher_env = {key: value for key, value in os.environ.items() if "SLURM" not in key}
    launcher = subprocess.run(
        _train(recipe, launched_run, "distributed.nproc_per_node=2"),
        cwd=ROOT,
        env={**launcher_env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    for task in tasks:
        output, _ = task.communicate(timeout=240)
        assert task.returncode == 0, output[-3000:]
    assert launcher.returncode == 0, launcher.stderr[-3000:]
    from_srun = newest_valid_checkpoint(srun_run)[1]
    from_launcher = newest_valid_checkpoint(launched_run)[1]
    assert (from_srun["iteration"], from_srun["world_size"]) == (2, 2)  # 24 images, batch 8
    assert from_srun["model"].keys() == from_launcher["model"].keys()
    for name, value in from_launcher["model"].items():
        assert torch.equal(from_srun["model"][name], value), name

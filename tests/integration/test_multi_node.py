"""Several nodes on loopback: two torchrun node agents meeting at a c10d rendezvous, and
the batch script of ``hookbus sbatch`` run with SLURM's variables for two tasks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch

from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.errors import PREEMPTED_EXIT_STATUS
from tests.kill_harness import write_recipe
from tests.torchrun import python

ROOT = Path(__file__).resolve().parents[2]
LINEAR_EVAL = [
    str(ROOT / "configs" / "linear_eval_digits.yaml"),
    "trainer.test_only=true",
    "model.linear_eval.checkpoint=null",
    "data.test_size=499",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.summary_plot.enabled=false",
    "distributed.backend=gloo",
    "machine.device=cpu",
    "machine.num_threads=1",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _test_row(run_dir: Path) -> dict:
    [row] = [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]
    return row


def test_two_node_agents_evaluate_as_one_process(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    python("-m", "hookbus", "train", *LINEAR_EVAL, f"checkpoint.dir={one}", "-q")
    endpoint = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    agents = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "torch.distributed.run", "--nnodes=2"),
                *("--nproc-per-node=1", f"--node-rank={node}", "--rdzv-backend=c10d"),
                *(f"--rdzv-endpoint={endpoint}", "--rdzv-id=two-nodes", "--local-addr=127.0.0.1"),
                *("-m", "hookbus", "train", *LINEAR_EVAL, f"checkpoint.dir={two}", "-q"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for node in (0, 1)
    ]
    for agent in agents:
        output, _ = agent.communicate(timeout=240)
        assert agent.returncode == 0, output[-3000:]
    single, pair = _test_row(one), _test_row(two)
    assert 0.5 < single["knn_top1"] < 1.0
    assert (pair["knn_top1"], pair["top1"], pair["top5"]) == (
        single["knn_top1"],
        single["top1"],
        single["top5"],
    )


FAKE_SRUN = """#!/bin/bash
# srun on one node: SLURM_NTASKS copies of the command, as srun starts its tasks.
while [[ "$1" == -* ]]; do shift; done
pids=()
export SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=$SLURM_NTASKS SLURM_STEP_NODELIST=$SLURM_JOB_NODELIST
for ((task = 0; task < SLURM_NTASKS; task++)); do
  SLURM_PROCID=$task SLURM_LOCALID=$task SLURM_NODEID=0 "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid"; code=$?
  if ((code > status)); then status=$code; fi
done
exit "$status"
"""

FAKE_SCONTROL = """#!/bin/bash
# scontrol's use in the script: the requeue (recorded).
if [ "$1" = requeue ]; then echo "$2" >> "$REQUEUED"; fi
"""


def _sbatch_script(tmp_path: Path, run: Path, *overrides: str) -> Path:
    """``hookbus sbatch`` for 1 node x 2 tasks of the tiny recipe (4 epochs, 1 step
    each) into ``run``, written to a file."""
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=4)
    written = subprocess.run(
        [
            *(sys.executable, "-m", "hookbus", "sbatch", "--nodes=1", "--gpus-per-node=2"),
            *("--time=00:10:00", f"--port={_free_port()}", str(recipe)),
            *(f"checkpoint.dir={run}", "distributed.backend=gloo", *overrides, "-q"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    script = tmp_path / f"{run.name}.sbatch"
    script.write_text(written.stdout)
    return script


def _run_as_slurm_job(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """``bash SCRIPT`` with SLURM's variables for 2 tasks on one node, ``srun`` and
    ``scontrol`` standing in for SLURM's (the requeue written to ``tmp_path/requeued``)."""
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "127.0.0.1",
        "SLURM_NTASKS": "2",
        "SLURM_NTASKS_PER_NODE": "2",
        "REQUEUED": str(tmp_path / "requeued"),
    }
    return subprocess.run(
        ["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_a_slurm_job_preempted_exits_75_requeues_and_resumes_as_if_never_stopped(
    tmp_path: Path,
) -> None:
    reference, run = tmp_path / "reference", tmp_path / "run"
    finished = _run_as_slurm_job(_sbatch_script(tmp_path, reference), tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert not (tmp_path / "requeued").exists()
    stop = "{name: request_stop, params: {rank: 1, at_iteration: 2}}"
    script = _sbatch_script(
        tmp_path,
        run,
        "trainer.imports=[tests.tiny_data,tests.failure_hooks]",
        f"hooks.extra=[{stop}]",
    )
    preempted = _run_as_slurm_job(script, tmp_path)
    assert preempted.returncode == PREEMPTED_EXIT_STATUS, preempted.stderr[-3000:]
    assert (tmp_path / "requeued").read_text() == "4242\n"
    assert newest_valid_checkpoint(run)[1]["iteration"] == 2
    requeued = _run_as_slurm_job(script, tmp_path)  # the same script, as SLURM restarts it
    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert (tmp_path / "requeued").read_text() == "4242\n"  # not requeued again
    expected, resumed = (newest_valid_checkpoint(path)[1] for path in (reference, run))
    assert (resumed["iteration"], resumed["world_size"]) == (4, 2)
    assert expected["model"].keys() == resumed["model"].keys()
    for name, value in expected["model"].items():
        assert torch.equal(resumed["model"][name], value), name

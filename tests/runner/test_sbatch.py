"""``hookbus sbatch``: the SLURM batch script it prints, and what it refuses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hookbus.cli import main

OPTIONS = {"--nodes": "2", "--gpus-per-node": "8", "--time": "1-12:00:00"}


def _sbatch(capsys: pytest.CaptureFixture[str], *args: str, **options: str) -> tuple[int, str]:
    """``hookbus sbatch`` with :data:`OPTIONS` updated by ``options`` (``gpus_per_node``
    for ``--gpus-per-node``), then ``args``; its exit status and output (stdout, stderr)."""
    chosen = {**OPTIONS, **{f"--{key.replace('_', '-')}": value for key, value in options.items()}}
    status = main(["sbatch", *(f"{key}={value}" for key, value in chosen.items()), *args])
    out, err = capsys.readouterr()
    return status, out + err


def test_the_script_asks_for_the_nodes_tasks_gpus_time_signal_and_requeue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, script = _sbatch(capsys, "simclr_digits", job_name="simclr", partition="gpu")
    assert status == 0
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=simclr",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --time=1-12:00:00",
        "#SBATCH --partition=gpu",
        "#SBATCH --signal=USR1@120",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --output=simclr-%j.out",
    ]


def test_each_task_gets_torchruns_variables_from_slurms_and_trains_the_recipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, script = _sbatch(capsys, "simclr_digits", "checkpoint.dir=/shared/runs/a b", port="29633")
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert "export MASTER_ADDR MASTER_PORT=29633" in script
    assert (
        "srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
        "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE exec hookbus train simclr_digits "
        "'\"'\"'checkpoint.dir=/shared/runs/a b'\"'\"''\n"
    ) in script


def test_a_preempted_run_requeues_the_job_and_any_other_status_ends_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, script = _sbatch(capsys, "simclr_digits")
    assert script.endswith(
        "status=$?\n# 75: stopped by the time-limit signal after a checkpoint; the requeued "
        'job resumes it.\nif [ "$status" -eq 75 ]; then\n  scontrol requeue "$SLURM_JOB_ID"\n'
        'fi\nexit "$status"\n'
    )


def test_bash_accepts_the_script(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, script = _sbatch(capsys, "simclr_digits", "hooks.extra=[{name: x, params: {a: 1}}]")
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert (checked.returncode, checked.stderr) == (0, "")


def test_a_bad_override_is_refused_before_anything_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, output = _sbatch(capsys, "simclr_digits", "optimizer.lrr=1")
    assert status == 2
    assert output.startswith("hookbus sbatch: error: invalid config (")
    assert "#!/bin/bash" not in output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": "0"}, "--nodes 0: a job needs at least one node"),
        ({"gpus_per_node": "0"}, "--gpus-per-node 0: the script starts one task per GPU"),
        ({"time": "90"}, "--time '90' is not a SLURM time limit HH:MM:SS or DAYS-HH:MM:SS"),
        ({"time": "00:01:00"}, "--signal-seconds 120 must be above 0 and below the time limit"),
        ({"port": "70000"}, "--port 70000 is not a TCP port (1-65535)"),
        ({"job_name": "a b"}, "--job-name 'a b': use 1-64 letters, digits"),
    ],
)
def test_what_slurm_cannot_honour_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], options: dict[str, str], message: str
) -> None:
    status, output = _sbatch(capsys, "simclr_digits", **options)
    assert status == 2
    assert output.startswith(f"hookbus sbatch: error: {message}")
    assert len(output.splitlines()) == 1

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


def test_srun_starts_the_recipe_and_each_task_reads_slurms_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, script = _sbatch(capsys, "simclr_digits", "checkpoint.dir=/shared/runs/a b", port="29633")
    assert "export MASTER_PORT=29633\n" in script
    assert "\nsrun hookbus train simclr_digits 'checkpoint.dir=/shared/runs/a b'\n" in script
    assert "scontrol show" not in script  # hookbus reads the node list itself


def test_without_a_port_the_tasks_meet_at_one_made_from_the_job_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, script = _sbatch(capsys, "simclr_digits")
    assert "MASTER_PORT" not in script
    assert "# The tasks meet on the first node, at a port made from the job's id." in script


def test_a_cpu_only_script_asks_for_no_gpus_and_the_tasks_per_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, script = _sbatch(capsys, "simclr_digits", gpus_per_node="0", tasks_per_node="4")
    assert status == 0
    sbatch = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --ntasks-per-node=4" in sbatch
    assert not [line for line in sbatch if "gpu" in line]
    status, script = _sbatch(capsys, "simclr_digits", gpus_per_node="0")
    assert "#SBATCH --ntasks-per-node=1" in script.splitlines()


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
        ({"gpus_per_node": "-1"}, "--gpus-per-node -1: give 0 for CPU nodes"),
        ({"gpus_per_node": "0", "tasks_per_node": "0"}, "--tasks-per-node 0: a node needs"),
        ({"tasks_per_node": "4"}, "--tasks-per-node 4 with --gpus-per-node 8: a task trains"),
        ({"time": "24:00:00\n"}, "--time '24:00:00\\n' is not a SLURM time limit"),
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

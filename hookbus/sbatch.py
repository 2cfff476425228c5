"""``hookbus sbatch``: the SLURM batch script that trains a recipe on several nodes.

The script starts one task per GPU with ``srun``; each task maps SLURM's variables to the
ones hookbus reads (those of ``torchrun``): ``RANK=$SLURM_PROCID``,
``LOCAL_RANK=$SLURM_LOCALID``, ``WORLD_SIZE=$SLURM_NTASKS``,
``LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE``, with the first node of the job as
``MASTER_ADDR``. SLURM sends ``SIGUSR1`` to every task ``--signal-seconds`` before the
time limit; hookbus checkpoints after the step and exits with status 75, and the script
then requeues the job, whose next start resumes from that checkpoint.

Torch-free: the command checks the recipe and writes text.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from hookbus.engine.errors import PREEMPTED_EXIT_STATUS, ConfigError

TIME_LIMIT = re.compile(r"^(?:(\d+)-)?(\d{1,2}):([0-5]\d):([0-5]\d)$")
"""SLURM's ``[DAYS-]HH:MM:SS`` time limit (the only form the command accepts)."""

JOB_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class SbatchRequest:
    """What the script asks SLURM for, and the training command it runs."""

    recipe: str
    overrides: tuple[str, ...]
    nodes: int
    gpus_per_node: int
    time: str
    job_name: str
    port: int = 29500
    signal_seconds: int = 120
    partition: str | None = None


def check_request(request: SbatchRequest) -> None:
    """Refuse, with a :class:`ConfigError` naming the option, what SLURM or hookbus
    could not honour: no nodes or GPUs, a malformed time limit or job name, a port
    outside 1-65535, a warning time of 0 or one that leaves the job no time to train."""
    if request.nodes < 1:
        raise ConfigError(f"--nodes {request.nodes}: a job needs at least one node")
    if request.gpus_per_node < 1:
        raise ConfigError(
            f"--gpus-per-node {request.gpus_per_node}: the script starts one task per GPU, "
            "so it needs at least one"
        )
    match = TIME_LIMIT.match(request.time)
    if match is None:
        raise ConfigError(
            f"--time {request.time!r} is not a SLURM time limit HH:MM:SS or DAYS-HH:MM:SS"
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    limit = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if not 0 < request.signal_seconds < limit:
        raise ConfigError(
            f"--signal-seconds {request.signal_seconds} must be above 0 and below the time "
            f"limit ({limit} s): the warning that lets the run checkpoint before it is killed"
        )
    if not JOB_NAME.match(request.job_name):
        raise ConfigError(
            f"--job-name {request.job_name!r}: use 1-64 letters, digits, '_', '.' or '-'"
        )
    if not 1 <= request.port <= 65535:
        raise ConfigError(f"--port {request.port} is not a TCP port (1-65535)")
    if request.partition is not None and not JOB_NAME.match(request.partition):
        raise ConfigError(f"--partition {request.partition!r} is not a partition name")


def sbatch_script(request: SbatchRequest) -> str:
    """The batch script of ``request`` (checked by :func:`check_request`), as text."""
    check_request(request)
    train = shlex.join(["hookbus", "train", request.recipe, *request.overrides])
    task = (
        "RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
        f"LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE exec {train}"
    )
    partition = [f"#SBATCH --partition={request.partition}"] if request.partition else []
    lines = [
        "#!/bin/bash",
        f"# Written by hookbus sbatch for {request.recipe}; submit it with: sbatch FILE",
        f"#SBATCH --job-name={request.job_name}",
        f"#SBATCH --nodes={request.nodes}",
        f"#SBATCH --ntasks-per-node={request.gpus_per_node}",
        f"#SBATCH --gpus-per-node={request.gpus_per_node}",
        f"#SBATCH --time={request.time}",
        *partition,
        f"#SBATCH --signal=USR1@{request.signal_seconds}",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        f"#SBATCH --output={request.job_name}-%j.out",
        "",
        "# The first node of the job is where the tasks meet.",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export MASTER_ADDR MASTER_PORT={request.port}",
        "# One task per GPU, each with the variables hookbus reads (those of torchrun).",
        f"srun bash -c {shlex.quote(task)}",
        "status=$?",
        f"# {PREEMPTED_EXIT_STATUS}: stopped by the time-limit signal after a checkpoint;"
        " the requeued job resumes it.",
        f'if [ "$status" -eq {PREEMPTED_EXIT_STATUS} ]; then',
        '  scontrol requeue "$SLURM_JOB_ID"',
        "fi",
        'exit "$status"',
        "",
    ]
    return "\n".join(lines)

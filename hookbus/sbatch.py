"""``hookbus sbatch``: the SLURM batch script that trains a recipe on several nodes.

The script starts the tasks with ``srun hookbus train RECIPE ...``: one task per GPU, or
``--tasks-per-node`` CPU tasks on a cluster without GPUs (``--gpus-per-node 0``). Each
task reads its rank, the world size and where to meet from SLURM's variables
(:mod:`hookbus.engine.process.slurm_env`). SLURM sends ``SIGUSR1`` to every task
``--signal-seconds`` before the time limit; hookbus checkpoints after the step and exits
with status 75, and the script then requeues the job, whose next start resumes from that
checkpoint.

Every value that reaches the script from the user (the recipe, the overrides) is quoted
for the shell (``shlex.quote``), and one with a control character (a newline, a
carriage return, an escape) is refused: such a name could end a line of the script and
start a command the user never wrote. The ``#SBATCH`` values are checked against what
SLURM accepts (numbers, a time limit, names of letters and digits).

Torch-free: the command checks the recipe and writes text.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass

from hookbus.engine.errors import PREEMPTED_EXIT_STATUS, ConfigError

TIME_LIMIT = re.compile(r"^(?:(\d+)-)?(\d{1,2}):([0-5]\d):([0-5]\d)\Z")
"""SLURM's ``[DAYS-]HH:MM:SS`` time limit (the only form the command accepts)."""

JOB_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")


@dataclass(frozen=True)
class SbatchRequest:
    """What the script asks SLURM for, and the training command it runs."""

    recipe: str
    overrides: tuple[str, ...]
    nodes: int
    gpus_per_node: int
    time: str
    job_name: str
    port: int | None = None
    """Where the tasks meet (``MASTER_PORT``); None: a port from the job's id."""
    signal_seconds: int = 120
    partition: str | None = None
    tasks_per_node: int | None = None
    """Tasks on each node; None: one per GPU (one on a node without GPUs)."""

    @property
    def tasks(self) -> int:
        """The tasks each node runs."""
        if self.tasks_per_node is not None:
            return self.tasks_per_node
        return self.gpus_per_node or 1


def check_request(request: SbatchRequest) -> None:
    """Refuse, with a :class:`ConfigError` naming the option, what SLURM or hookbus
    could not honour: no nodes, a negative GPU count, a task count that is not one per
    GPU, a malformed time limit or job name, a port outside 1-65535, a warning time of 0
    or one that leaves the job no time to train, a control character in the recipe or
    an override."""
    if request.nodes < 1:
        raise ConfigError(f"--nodes {request.nodes}: a job needs at least one node")
    if request.gpus_per_node < 0:
        raise ConfigError(
            f"--gpus-per-node {request.gpus_per_node}: give 0 for CPU nodes, or the GPUs "
            "each node has"
        )
    if request.tasks < 1:
        raise ConfigError(f"--tasks-per-node {request.tasks}: a node needs at least one task")
    if request.gpus_per_node and request.tasks != request.gpus_per_node:
        raise ConfigError(
            f"--tasks-per-node {request.tasks} with --gpus-per-node "
            f"{request.gpus_per_node}: a task trains on one GPU, so they must be equal "
            "(leave --tasks-per-node out)"
        )
    check_text("the recipe", request.recipe)
    for override in request.overrides:
        check_text("the override", override)
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
    if request.port is not None and not 1 <= request.port <= 65535:
        raise ConfigError(f"--port {request.port} is not a TCP port (1-65535)")
    if request.partition is not None and not JOB_NAME.match(request.partition):
        raise ConfigError(f"--partition {request.partition!r} is not a partition name")


def default_job_name(recipe: str) -> str:
    """The job name of a recipe: its file name without ``.yaml``, each character SLURM's
    names do not take made ``_`` (at most 64)."""
    stem = recipe.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".yaml")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:64] or "hookbus"


def check_text(what: str, text: str) -> None:
    """Refuse ``text`` (a path or a value bound for a shell script) when it holds a
    control character: ``ConfigError`` naming ``what``, the character and where."""
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cc":
            raise ConfigError(
                f"{what} {text[:60]!r} has the control character {char!r} at position "
                f"{index + 1}: hookbus sbatch writes no name or value with control "
                "characters into a script; rename the file or change the value"
            )


def sbatch_script(request: SbatchRequest) -> str:
    """The batch script of ``request`` (checked by :func:`check_request`), as text."""
    check_request(request)
    train = shlex.join(["hookbus", "train", request.recipe, *request.overrides])
    gpus = [f"#SBATCH --gpus-per-node={request.gpus_per_node}"] if request.gpus_per_node else []
    partition = [f"#SBATCH --partition={request.partition}"] if request.partition else []
    port = (
        [f"export MASTER_PORT={request.port}"]
        if request.port is not None
        else ["# The tasks meet on the first node, at a port made from the job's id."]
    )
    lines = [
        "#!/bin/bash",
        "# Written by hookbus sbatch; submit it with: sbatch FILE",
        f"#SBATCH --job-name={request.job_name}",
        f"#SBATCH --nodes={request.nodes}",
        f"#SBATCH --ntasks-per-node={request.tasks}",
        *gpus,
        f"#SBATCH --time={request.time}",
        *partition,
        f"#SBATCH --signal=USR1@{request.signal_seconds}",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        f"#SBATCH --output={request.job_name}-%j.out",
        "",
        *port,
        "# Each task reads its rank and the world size from SLURM's variables.",
        f"srun {train}",
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

"""SLURM's own way: ``srun hookbus train ...`` places each task in the run.

srun starts every task of a step with ``SLURM_PROCID`` (the rank), ``SLURM_NTASKS`` (the
world size), ``SLURM_LOCALID`` (the rank on its node), ``SLURM_NODEID`` and
``SLURM_STEP_TASKS_PER_NODE`` (the tasks on each node), ``SLURM_STEP_NODELIST`` (the
step's nodes, task 0 on the first) and ``SLURM_JOB_ID``. From them:

======================  ==================================================================
value                   from
======================  ==================================================================
world size              ``SLURM_NTASKS`` (``SLURM_STEP_NUM_TASKS`` must agree when set)
rank                    ``SLURM_PROCID``
local rank              ``SLURM_LOCALID``
local world size        ``SLURM_STEP_TASKS_PER_NODE`` (or ``SLURM_TASKS_PER_NODE``) at
                        ``SLURM_NODEID``; the world size when neither is set
master address          ``MASTER_ADDR`` when set, else the first host of
                        ``SLURM_STEP_NODELIST`` (or ``SLURM_JOB_NODELIST``,
                        ``SLURM_NODELIST``), parsed in Python
master port             ``MASTER_PORT`` when set, else ``15000 + SLURM_JOB_ID % 20000``:
                        the same for every task of the job, different for jobs beside it
======================  ==================================================================

A missing, malformed or inconsistent variable is a
:class:`hookbus.engine.process.launch_env.LaunchEnvironmentError` naming it (one line, exit
status 2). Torch-free.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from hookbus.engine.process.launch_env import (
    MAX_WORLD_SIZE,
    LaunchEnvironment,
    LaunchEnvironmentError,
    number_variable,
)
from hookbus.engine.process.slurm_hosts import first_host, tasks_per_node

logger = logging.getLogger("hookbus")

NODE_LISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
TASK_COUNTS = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
PORT_BASE, PORT_SPAN = 15000, 20000
"""The port of a job without ``MASTER_PORT``: ``PORT_BASE + SLURM_JOB_ID % PORT_SPAN``."""


def slurm_environment(env: Mapping[str, str]) -> LaunchEnvironment | None:
    """This task's place from srun's variables, or None when srun did not start it in a
    step of more than one task (no ``SLURM_NTASKS`` above 1, or no ``SLURM_STEP_ID``)."""
    if "SLURM_NTASKS" not in env:
        return None
    world = number_variable(env, "SLURM_NTASKS", 1, 1, MAX_WORLD_SIZE)
    if world <= 1:
        return None
    if "SLURM_STEP_ID" not in env:
        _not_a_step(world)
        return None
    step_tasks = number_variable(env, "SLURM_STEP_NUM_TASKS", world, 1, MAX_WORLD_SIZE)
    if step_tasks != world:
        raise LaunchEnvironmentError(
            f"environment variable SLURM_STEP_NUM_TASKS={step_tasks} disagrees with "
            f"SLURM_NTASKS={world}: start the tasks with srun, which sets both"
        )
    rank = _required(env, "SLURM_PROCID", world, 0, world - 1, f"below SLURM_NTASKS={world}")
    local_world, bound = _local_world(env, world)
    local_rank = _required(env, "SLURM_LOCALID", world, 0, local_world - 1, f"below {bound}")
    return LaunchEnvironment(
        world,
        rank,
        local_rank,
        env["MASTER_ADDR"] if env.get("MASTER_ADDR", "").strip() else _first_node(env, world),
        _port(env, world),
        True,
        local_world_size=local_world,
        source="slurm",
    )


def _required(env: Mapping[str, str], name: str, world: int, low: int, high: int, rule: str) -> int:
    if name not in env:
        raise LaunchEnvironmentError(
            f"environment variable {name} is not set, and SLURM_NTASKS={world} needs it "
            "(srun sets it for every task)"
        )
    return number_variable(env, name, 0, low, high, rule)


def _local_world(env: Mapping[str, str], world: int) -> tuple[int, str]:
    """Tasks on this node, and how an error names that bound."""
    name = next((name for name in TASK_COUNTS if name in env), None)
    if name is None:
        return world, f"SLURM_NTASKS={world}"
    text = env[name]
    try:
        counts = tasks_per_node(text)
    except ValueError as exc:
        raise LaunchEnvironmentError(f"environment variable {name}={text[:40]!r} {exc}") from None
    if sum(counts) != world or 0 in counts:
        raise LaunchEnvironmentError(
            f"environment variable {name}={text[:40]!r} counts {sum(counts)} tasks on "
            f"{len(counts)} nodes, and SLURM_NTASKS={world}"
        )
    node = _required(env, "SLURM_NODEID", world, 0, len(counts) - 1, f"below {len(counts)} nodes")
    return counts[node], f"{counts[node]} tasks on node {node} ({name})"


def _first_node(env: Mapping[str, str], world: int) -> str:
    name = next((name for name in NODE_LISTS if env.get(name, "").strip()), None)
    if name is None:
        raise LaunchEnvironmentError(
            f"environment variable SLURM_STEP_NODELIST is not set, and SLURM_NTASKS={world} "
            "needs it (or MASTER_ADDR): the node where task 0 runs"
        )
    try:
        return first_host(env[name].strip())
    except ValueError as exc:
        raise LaunchEnvironmentError(
            f"environment variable {name}={env[name][:40]!r} is not a SLURM node list: {exc}"
        ) from None


def _port(env: Mapping[str, str], world: int) -> int:
    if "MASTER_PORT" in env:
        return number_variable(env, "MASTER_PORT", 0, 1, 65535)
    if "SLURM_JOB_ID" not in env:
        raise LaunchEnvironmentError(
            f"environment variable SLURM_JOB_ID is not set, and SLURM_NTASKS={world} needs "
            "it (or MASTER_PORT): the tasks' meeting port comes from it"
        )
    job = number_variable(env, "SLURM_JOB_ID", 0, 0, 10**12 - 1)
    return PORT_BASE + job % PORT_SPAN


@functools.cache
def _not_a_step(world: int) -> None:
    """Say once that a process outside an srun step trains alone."""
    logger.warning(
        "SLURM_NTASKS=%d, but srun did not start this process (no SLURM_STEP_ID): it "
        "trains as one process; run it as srun hookbus train ... to train on %d tasks",
        world,
        world,
    )

"""The launch environment: the variables that ``torchrun``, ``hookbus train``'s own
launcher or SLURM's ``srun`` give each training process, read and checked once.

``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` must be whole numbers
in range (a rank below the world size, a local rank below the local world size),
``MASTER_PORT`` a TCP port, and a world of more than one process needs ``MASTER_ADDR``
and ``MASTER_PORT``. Anything else is a :class:`LaunchEnvironmentError` naming the
variable (a user error: one line, exit status 2), before torch reads them.

Without those (no ``WORLD_SIZE``, ``RANK`` or ``LOCAL_RANK``), a task that ``srun``
started in a step of more than one task (``SLURM_STEP_ID`` set, ``SLURM_NTASKS`` > 1)
takes its place from SLURM (:mod:`hookbus.engine.process.slurm_env`). A process with
``SLURM_NTASKS`` > 1 that srun did not start (a batch script's own shell) is one
process, and says so once.

Torch-free, so the command line checks them before it loads the trainer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hookbus.engine.errors import UserError

MAX_WORLD_SIZE = 1 << 20
_WHOLE_NUMBER = re.compile(r"^\s*[+-]?\d{1,12}\s*$")


class LaunchEnvironmentError(UserError):
    """A launch environment variable that is malformed, out of range or missing."""


@dataclass(frozen=True)
class LaunchEnvironment:
    """This process's place in the run, from the environment (one process: 1, 0, 0)."""

    world_size: int
    rank: int
    local_rank: int
    master_addr: str | None
    master_port: int | None
    launched: bool
    """Whether a launcher started this process (``WORLD_SIZE`` is set, or srun's
    variables place it in a step of several tasks)."""
    local_world_size: int = 1
    """Processes of the run on this machine."""
    source: str = ""
    """Where the values came from: ``"torchrun"`` (its variables, also set by hookbus's
    launcher), ``"slurm"`` (srun's) or ``""`` (one process)."""

    def torch_variables(self) -> dict[str, str]:
        """The variables ``torch.distributed``'s ``env://`` rendezvous reads, as torchrun
        sets them, for this place in the run."""
        return {
            "WORLD_SIZE": str(self.world_size),
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "MASTER_ADDR": self.master_addr or "",
            "MASTER_PORT": str(self.master_port or ""),
        }


def launch_environment(environ: Mapping[str, str] | None = None) -> LaunchEnvironment:
    """The launch environment of ``environ`` (default: ``os.environ``), checked.

    Example::

        env = launch_environment()  # LaunchEnvironmentError: RANK=2 is not below ...
        if env.world_size > 1: ...
    """
    env = os.environ if environ is None else environ
    if not any(name in env for name in TORCHRUN_VARIABLES):
        from hookbus.engine.process.slurm_env import slurm_environment  # it builds on this module

        slurm = slurm_environment(env)
        if slurm is not None:
            return slurm
    world_size = number_variable(env, "WORLD_SIZE", 1, 1, MAX_WORLD_SIZE)
    rank = number_variable(env, "RANK", 0, 0, world_size - 1, f"below WORLD_SIZE={world_size}")
    local_world_size = number_variable(
        env, "LOCAL_WORLD_SIZE", world_size, 1, world_size, f"at most WORLD_SIZE={world_size}"
    )
    bound = "LOCAL_WORLD_SIZE" if "LOCAL_WORLD_SIZE" in env else "WORLD_SIZE"
    local_rank = number_variable(
        env, "LOCAL_RANK", 0, 0, local_world_size - 1, f"below {bound}={local_world_size}"
    )
    port = number_variable(env, "MASTER_PORT", 0, 1, 65535) if "MASTER_PORT" in env else None
    addr = env.get("MASTER_ADDR")
    if world_size > 1:
        for name, value in (("MASTER_ADDR", addr), ("MASTER_PORT", port)):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise LaunchEnvironmentError(
                    f"environment variable {name} is not set, and WORLD_SIZE={world_size} "
                    "needs it: the address and port where the processes meet (torchrun "
                    "sets it; so does hookbus train with distributed.nproc_per_node)"
                )
    launched = "WORLD_SIZE" in env
    return LaunchEnvironment(
        world_size,
        rank,
        local_rank,
        addr,
        port,
        launched,
        local_world_size=local_world_size,
        source="torchrun" if launched else "",
    )


TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")
"""Any of these set: the process was started by torchrun or a launcher that sets its
variables (hookbus's, or a batch script's line that maps SLURM's to them)."""


def number_variable(
    env: Mapping[str, str], name: str, default: int, low: int, high: int, rule: str = ""
) -> int:
    """The whole number in ``env[name]`` (``default`` when unset), within ``low..high``."""
    text = env.get(name)
    if text is None:
        return default
    shown = f"environment variable {name}={text[:40]!r}"
    if not _WHOLE_NUMBER.match(text):
        raise LaunchEnvironmentError(f"{shown} is not a whole number")
    value = int(text)
    if value < low:
        raise LaunchEnvironmentError(f"{shown} is below {low}")
    if value > high:
        raise LaunchEnvironmentError(f"{shown} is not {rule or f'at most {high}'}")
    return value

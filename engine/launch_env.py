"""The launch environment: the variables that ``torchrun``, ``srun`` with torchrun, or
``hookbus train``'s own launcher give each training process, read and checked once.

``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` must be whole numbers
in range (a rank below the world size, a local rank below the local world size),
``MASTER_PORT`` a TCP port, and a world of more than one process needs ``MASTER_ADDR``
and ``MASTER_PORT``. Anything else is a :class:`LaunchEnvironmentError` naming the
variable (a user error: one line, exit status 2), before torch reads them. hookbus reads
no ``SLURM_*`` variable itself: under SLURM, ``srun torchrun ...`` sets these.

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
    """Whether a launcher started this process (``WORLD_SIZE`` is set)."""


def launch_environment(environ: Mapping[str, str] | None = None) -> LaunchEnvironment:
    """The launch environment of ``environ`` (default: ``os.environ``), checked.

    Example::

        env = launch_environment()  # LaunchEnvironmentError: RANK=2 is not below ...
        if env.world_size > 1: ...
    """
    env = os.environ if environ is None else environ
    world_size = _number(env, "WORLD_SIZE", 1, 1, MAX_WORLD_SIZE)
    rank = _number(env, "RANK", 0, 0, world_size - 1, f"below WORLD_SIZE={world_size}")
    local_world_size = _number(
        env, "LOCAL_WORLD_SIZE", world_size, 1, world_size, f"at most WORLD_SIZE={world_size}"
    )
    bound = "LOCAL_WORLD_SIZE" if "LOCAL_WORLD_SIZE" in env else "WORLD_SIZE"
    local_rank = _number(
        env, "LOCAL_RANK", 0, 0, local_world_size - 1, f"below {bound}={local_world_size}"
    )
    port = _number(env, "MASTER_PORT", 0, 1, 65535) if "MASTER_PORT" in env else None
    addr = env.get("MASTER_ADDR")
    if world_size > 1:
        for name, value in (("MASTER_ADDR", addr), ("MASTER_PORT", port)):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise LaunchEnvironmentError(
                    f"environment variable {name} is not set, and WORLD_SIZE={world_size} "
                    "needs it: the address and port where the processes meet (torchrun "
                    "sets it; so does hookbus train with distributed.nproc_per_node)"
                )
    return LaunchEnvironment(world_size, rank, local_rank, addr, port, "WORLD_SIZE" in env)


def _number(
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

"""Process-group helpers: rank, world size, barrier and reductions, no-ops in one process."""

from __future__ import annotations

import atexit
import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from hookbus.engine.config import Config
from hookbus.engine.errors import CollectiveFailure, ConfigError
from hookbus.engine.process.launch_env import (
    LaunchEnvironment,
    LaunchEnvironmentError,
    launch_environment,
)


def is_distributed() -> bool:
    """True when a process group with more than one process is initialised."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 without a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def barrier() -> None:
    """Wait for every rank; returns at once in one process."""
    if is_distributed():
        dist.barrier()


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of ``tensor`` over ranks (the tensor itself in one process)."""
    if not is_distributed():
        return tensor
    reduced = tensor.clone()
    dist.all_reduce(reduced)
    return reduced / dist.get_world_size()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over ranks (the tensor itself in one process); no gradient."""
    if not is_distributed():
        return tensor
    reduced = tensor.clone()
    dist.all_reduce(reduced)
    return reduced


def all_reduce_max(tensor: torch.Tensor) -> torch.Tensor:
    """The element-wise maximum of ``tensor`` over ranks (itself in one process)."""
    if not is_distributed():
        return tensor
    reduced = tensor.clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.MAX)
    return reduced


def all_gather_cat(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` of every rank concatenated along dim 0, in rank order; no gradient.

    Every rank must pass the same shape. In one process: the tensor itself.
    """
    if not is_distributed():
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


class _GatherWithGradient(torch.autograd.Function):
    """All-gather whose backward sends each rank the summed gradient of its own part."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor) -> Tensor:
        ctx.rows = len(tensor)
        return all_gather_cat(tensor)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        summed = grad.clone(memory_format=torch.contiguous_format)  # all_reduce is in place
        dist.all_reduce(summed)
        start = dist.get_rank() * ctx.rows
        return summed[start : start + ctx.rows]


def all_gather_cat_with_gradient(tensor: Tensor) -> Tensor:
    """``tensor`` of every rank concatenated along dim 0, in rank order, with gradients.

    The gradient reaching this rank's ``tensor`` is the sum, over every rank's loss, of
    the gradient of its own rows of the result (each rank's loss uses every rank's
    rows). Every rank must pass the same shape. In one process: the tensor itself.
    """
    if not is_distributed():
        return tensor
    return _GatherWithGradient.apply(tensor)


class RendezvousFailure(CollectiveFailure):
    """The processes of a run did not all meet within ``distributed.init_timeout_seconds``."""


def init_from_environment(cfg: Config) -> bool:
    """Join the process group that ``torchrun`` or ``srun`` describes in the environment,
    if any.

    Returns True when this call initialised it. The environment is checked first
    (:func:`hookbus.engine.process.launch_env.launch_environment`: a malformed ``WORLD_SIZE``,
    ``RANK`` or ``LOCAL_RANK`` is a user error naming it); a task placed by srun's
    variables gets torchrun's (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...) set from
    them, so the rendezvous and its child processes read one description. The backend is
    ``distributed.backend``; ``auto`` picks nccl when CUDA is available and gloo
    otherwise. The processes must all meet within ``distributed.init_timeout_seconds``,
    else :class:`RendezvousFailure` says which rank waited where (exit status 1, instead
    of waiting for a process that never comes); after that, a collective that waits
    longer than ``distributed.timeout_seconds`` (a dead or hung rank) raises.
    A second, gloo, group carries control flags (:func:`control_group`). The groups
    are destroyed when the interpreter exits, before its own teardown: a group
    left to the interpreter's teardown can abort the process ("terminate called without
    an active exception") after a run that succeeded.
    """
    env = launch_environment()
    if dist.is_initialized() or env.world_size <= 1:
        return False
    if env.source == "slurm":  # torch's env:// reads torchrun's variables
        os.environ.update(env.torch_variables())
    backend = cfg.distributed.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    meet = cfg.distributed.init_timeout_seconds
    try:
        store = _launcher_store(env, timedelta(seconds=meet))
        if store is None:
            dist.init_process_group(backend=backend, timeout=timedelta(seconds=meet))
        else:
            dist.init_process_group(
                backend=backend,
                store=store,
                rank=env.rank,
                world_size=env.world_size,
                timeout=timedelta(seconds=meet),
            )
    except dist.DistError as exc:
        raise RendezvousFailure(
            f"rank {env.rank} of {env.world_size}: the processes did not all meet at "
            f"{env.master_addr}:{env.master_port} within distributed.init_timeout_seconds "
            f"({meet:g} s): {' '.join(str(exc).split())[:200]}; start every rank (torchrun "
            "--nproc_per_node, srun), or check MASTER_ADDR and MASTER_PORT"
        ) from None
    timeout = timedelta(seconds=cfg.distributed.timeout_seconds)
    dist.set_timeout(timeout)
    global _control_group
    _control_group = dist.new_group(backend="gloo", timeout=timeout)
    atexit.register(_destroy_group)
    return True


STORE_FD_VARIABLE = "HOOKBUS_STORE_FD"
"""Set by ``hookbus train``'s launcher (:mod:`hookbus.launcher`): the file descriptor of
its listening socket at ``MASTER_ADDR:MASTER_PORT``, open in rank 0."""


def _launcher_store(env: LaunchEnvironment, timeout: timedelta) -> dist.TCPStore | None:
    """The ranks' store when hookbus's launcher started them (None otherwise): rank 0
    serves it on the socket the launcher opened before starting any rank, so another
    rank that comes first waits in the socket's queue instead of being refused and
    retrying after a back-off; the other ranks connect to it."""
    text = os.environ.get(STORE_FD_VARIABLE)
    if text is None or env.source != "torchrun":
        return None
    if not text.isdigit():
        raise LaunchEnvironmentError(
            f"environment variable {STORE_FD_VARIABLE}={text[:40]!r} is not a file "
            "descriptor (hookbus's launcher sets it; unset it to use MASTER_PORT alone)"
        )
    return dist.TCPStore(
        str(env.master_addr),
        int(env.master_port or 0),
        env.world_size,
        is_master=env.rank == 0,
        timeout=timeout,
        wait_for_workers=False,
        master_listen_fd=int(text) if env.rank == 0 else None,
    )


_control_group: Any = None
"""The gloo group of :func:`control_group`, made with the default group."""


def control_group() -> Any:
    """A gloo group over every rank for small control messages on the host.

    Flags exchanged on it (the per-step stop agreement) never touch a GPU stream, so
    reading them does not wait for the GPU, whatever the training backend. None (the
    default group) when the process group was not made by :func:`init_from_environment`.
    """
    return _control_group if dist.is_initialized() else None


def _destroy_group() -> None:
    """Destroy the process groups if they are still there (run at exit)."""
    global _control_group
    _control_group = None
    if dist.is_initialized():
        dist.destroy_process_group()


def check_device(cfg: Config) -> None:
    """Raise a ConfigError when ``machine.device`` or ``data.augment_device`` asks for
    CUDA and none is there, or when the augmentations are to run on a GPU that the run
    does not train on."""
    if cfg.machine.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            "machine.device is 'cuda' but this machine has no CUDA device: use 'auto' or 'cpu'"
        )
    if cfg.data.augment_device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "data.augment_device is 'cuda' but this machine has no CUDA device: use "
                "'model' (the training device) or 'cpu'"
            )
        if cfg.machine.device == "cpu":
            raise ConfigError(
                "data.augment_device is 'cuda' but machine.device is 'cpu': the color "
                "augmentations run on the training device; use 'model' or 'cpu'"
            )


def select_device(cfg: Config) -> torch.device:
    """The device this process trains on: ``machine.device``, one GPU per local rank."""
    wanted = cfg.machine.device
    if wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available()):
        check_device(cfg)
        local_rank = launch_environment().local_rank
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


_COLLECTIVE_FAILURES = (
    "timed out",
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "nccl",
)
"""Words (lower case) of the errors gloo and nccl raise when a peer died or stopped
answering."""


def collective_failure(exc: BaseException) -> str | None:
    """A message saying that a collective failed because another rank died or hung, or
    None when ``exc`` is not such an error (or this process is not distributed).

    torch raises these as ``torch.distributed.DistError`` or, for gloo, as a plain
    ``RuntimeError`` naming the transport's failure; both are recognised.
    """
    if not is_distributed() and not isinstance(exc, dist.DistError):
        return None
    text = str(exc)
    lowered = text.lower()
    if not isinstance(exc, dist.DistError) and not any(w in lowered for w in _COLLECTIVE_FAILURES):
        return None
    return (
        f"rank {rank()}: a collective across ranks failed (another rank died, or did not "
        f"reach it within distributed.timeout_seconds): {text[:300]}"
    )

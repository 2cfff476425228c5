"""Process-wide settings a run applies before it builds anything, and takes back after:
math flags, thread count and seeds."""

from __future__ import annotations

import os
import random
import sys
from typing import NamedTuple

import numpy as np
import torch

from hookbus.engine.config import Config


class ProcessSettings(NamedTuple):
    """The process-wide torch settings a run may change."""

    flush_denormal: bool
    num_threads: int
    deterministic: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool


def flush_denormal_enabled() -> bool:
    """Whether this thread flushes denormal floats to zero now (torch has no getter):
    half the smallest normal float survives only when it does not."""
    return not sys.float_info.min / 2 > 0


def cache_float_limits() -> None:
    """Have numpy compute the limits of its float types (``np.finfo``) now, while
    denormals are kept.

    numpy computes a type's limits on first use and caches them. Computed while
    denormals flush to zero, the smallest subnormal reads as 0 and numpy warns ("The
    value of the smallest subnormal ... is zero") from whatever library first asks,
    in the middle of a run. :func:`configure_process` calls this before it turns
    flushing on.
    """
    for dtype in (np.float16, np.float32, np.float64, np.longdouble):
        np.finfo(dtype)


def current_settings() -> ProcessSettings:
    """The settings as they are now."""
    return ProcessSettings(
        flush_denormal=flush_denormal_enabled(),
        num_threads=torch.get_num_threads(),
        deterministic=torch.are_deterministic_algorithms_enabled(),
        cudnn_deterministic=torch.backends.cudnn.deterministic,
        cudnn_benchmark=torch.backends.cudnn.benchmark,
    )


def restore_settings(settings: ProcessSettings) -> None:
    """Put back settings saved by :func:`current_settings`."""
    torch.set_flush_denormal(settings.flush_denormal)
    torch.set_num_threads(settings.num_threads)
    torch.use_deterministic_algorithms(settings.deterministic)
    torch.backends.cudnn.deterministic = settings.cudnn_deterministic
    torch.backends.cudnn.benchmark = settings.cudnn_benchmark


def configure_process(cfg: Config) -> ProcessSettings:
    """Apply ``machine.flush_denormal``, ``machine.num_threads`` and
    ``machine.deterministic``, then seed python, numpy and torch with ``trainer.seed``.

    numpy's float limits are cached first (:func:`cache_float_limits`). Returns the
    settings from before, for :func:`restore_settings` when the run ends
    (the trainer does it), so a run's flags never leak into the rest of the process:
    flush-denormal, for one, would turn the caller's own tiny floats into zeros. When
    ``deterministic`` is on, cuBLAS needs ``CUBLAS_WORKSPACE_CONFIG`` before CUDA
    starts: it is set (to ``:4096:8``) unless the environment has it.
    """
    previous = current_settings()
    cache_float_limits()
    torch.set_flush_denormal(cfg.machine.flush_denormal)
    if cfg.machine.num_threads:
        torch.set_num_threads(cfg.machine.num_threads)
    deterministic = cfg.machine.deterministic
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    seed = cfg.trainer.seed
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return previous

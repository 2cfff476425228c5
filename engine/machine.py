"""Process-wide settings a run applies before it builds anything: math flags and seeds."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from engine.config import Config


def configure_process(cfg: Config) -> None:
    """Apply ``machine.flush_denormal``, ``machine.num_threads`` and
    ``machine.deterministic``, then seed python, numpy and torch with ``trainer.seed``.

    ``deterministic`` is applied either way, so a run's setting never leaks into the
    next run of the same process. When on, cuBLAS needs ``CUBLAS_WORKSPACE_CONFIG``
    before CUDA starts: it is set (to ``:4096:8``) unless the environment has it.
    """
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

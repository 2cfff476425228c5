"""Process-wide settings a run applies before it builds anything: math flags and seeds."""

from __future__ import annotations

import random

import numpy as np
import torch

from engine.config import Config


def configure_process(cfg: Config) -> None:
    """Apply ``machine.flush_denormal`` and ``machine.num_threads``, then seed python,
    numpy and torch with ``trainer.seed``."""
    torch.set_flush_denormal(cfg.machine.flush_denormal)
    if cfg.machine.num_threads:
        torch.set_num_threads(cfg.machine.num_threads)
    seed = cfg.trainer.seed
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

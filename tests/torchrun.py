"""Run hookbus code in subprocesses: one plain process, or several under ``torchrun``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python(*args: str, timeout: float = 240) -> None:
    """``python ARGS...`` from the repository root, on loopback with one torch thread;
    fails the test, with the end of stderr, when it exits non-zero."""
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]


def torchrun(*target: str, processes: int = 2, timeout: float = 240) -> None:
    """``torchrun --standalone --nproc_per_node=N TARGET...`` as :func:`python` runs
    a command. ``target`` is a script path and its arguments, or ``"-m", module, ...``."""
    run = ("-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}")
    python(*run, *target, timeout=timeout)

"""numpy's float limits in a process where a run turned flush-denormal on: true values
and no warning, because the run cached them first. ``np.finfo`` caches, so the check
runs in a fresh process where nothing has asked for them yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FLOAT_LIMITS_AFTER_A_RUN_STARTS = """
import warnings
import numpy as np
from hookbus import load_config
from hookbus.engine.process.machine import configure_process, flush_denormal_enabled

configure_process(load_config(None, ["machine.flush_denormal=true"]))
assert flush_denormal_enabled()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tiny = [np.finfo(t).smallest_subnormal for t in (np.float16, np.float32, np.float64)]
    np.finfo(np.longdouble)
# Compared by their bytes: while denormals flush, a subnormal compares equal to 0.
assert all(value.tobytes().strip(b"\\0") for value in tiny), tiny
print(len(caught), *(str(w.message) for w in caught), sep="\\n")
"""


def test_numpy_float_limits_read_true_and_quiet_once_a_run_flushes_denormals() -> None:
    # numpy reports the smallest subnormals of float16, float32 and float64 as they
    # are, and warns of none, as when its limits were computed before flushing began.
    result = subprocess.run(
        [sys.executable, "-c", FLOAT_LIMITS_AFTER_A_RUN_STARTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"

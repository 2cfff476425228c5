"""Kill a real `hookbus train` many times with SIGKILL; check the result is bit-identical.

    .venv/bin/python benchmarks/kill_resume.py --kills 100 --epochs 200

Prints one table: kills made, how many landed inside a checkpoint write (a temporary
file was left behind), and whether the final parameters, the logged phase losses, the
metrics.json file and the iteration count equal those of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kill_harness import kill_campaign


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs per campaign")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill delays")
    parser.add_argument(
        "--window",
        type=float,
        default=None,
        help="max seconds before a kill (default: sized so all kills cover half the run)",
    )
    parser.add_argument("--epochs", type=int, default=200, help="epochs of the tiny recipe")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        outcome = kill_campaign(
            Path(workdir), args.kills, seed=args.seed, window=args.window, epochs=args.epochs
        )
    rows = [
        ("SIGKILLs", outcome.kills),
        ("  inside a checkpoint write", outcome.kills_in_writes),
        ("  before training started", outcome.kills_before_training),
        ("processes started", outcome.restarts + 1),
        ("kill window (s)", round(outcome.window, 3)),
        ("final parameters bit-identical", outcome.identical_parameters),
        ("phase losses identical", outcome.identical_losses),
        ("metrics.json identical", outcome.identical_metrics_file),
        ("final iteration identical", outcome.identical_iteration),
        ("wall time (s)", round(time.monotonic() - started)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for note in outcome.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()

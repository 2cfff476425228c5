"""Linear evaluation on the digits: from a SimCLR checkpoint vs from random init.

    .venv/bin/python benchmarks/linear_eval_digits.py
    .venv/bin/python benchmarks/linear_eval_digits.py --checkpoint runs/x/checkpoint.torch

Trains the SimCLR digits recipe (unless ``--checkpoint`` names one), then runs
``configs/linear_eval_digits.yaml`` twice, from that checkpoint and with
``model.linear_eval.checkpoint=null`` (the same backbone at random init), and prints the
top-1 and top-5 accuracy of the linear classifier on the held-out split (the last test
phase in ``metrics.json``) and the kNN top-1 of the frozen backbone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOOKBUS = str(ROOT / ".venv" / "bin" / "hookbus")


def train(recipe: str, run_dir: Path, *overrides: str) -> None:
    """``hookbus train`` of ``recipe`` in a fresh ``run_dir``."""
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [HOOKBUS, "train", str(ROOT / "configs" / recipe), f"checkpoint.dir={run_dir}"]
    command += ["hooks.progress_bar.enabled=false", *overrides, "-q"]
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def last_test_metrics(run_dir: Path) -> dict:
    """The metrics of the last test phase in ``run_dir/metrics.json``."""
    rows = [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]
    return [entry for entry in rows if not entry["train"]][-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="a pretraining checkpoint to start from")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "linear_eval_digits")
    args = parser.parse_args()
    checkpoint = args.checkpoint
    if checkpoint is None:
        train("simclr_digits.yaml", args.out / "simclr")
        checkpoint = args.out / "simclr" / "checkpoint.torch"
    starts = {"SimCLR checkpoint": str(checkpoint.resolve()), "random init": "null"}
    print("| backbone | linear top-1 | linear top-5 | kNN top-1 |")
    print("|---|---|---|---|")
    for name, start in starts.items():
        run_dir = args.out / ("from_checkpoint" if start != "null" else "from_random_init")
        train("linear_eval_digits.yaml", run_dir, f"model.linear_eval.checkpoint={start}")
        metrics = last_test_metrics(run_dir)
        print(
            f"| {name} | {metrics['top1']:.4f} | {metrics['top5']:.4f} "
            f"| {metrics['knn_top1']:.4f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import time
from collections.abc import Iterator
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


def parse_args(doc: str, default_out: str) -> argparse.Namespace:
    """The command line of a from-checkpoint benchmark: ``--checkpoint`` (a pretraining
    checkpoint; trained from the SimCLR digits recipe when absent) and ``--out``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="a pretraining checkpoint to start from")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / default_out)
    return parser.parse_args()


def runs_from_both_starts(
    recipe: str, checkpoint_key: str, args: argparse.Namespace
) -> Iterator[tuple[str, Path, float]]:
    """Train ``recipe`` from the pretraining checkpoint (``args.checkpoint``, or the SimCLR
    digits recipe trained first into ``args.out/simclr``) and then with the config key
    ``checkpoint_key`` set to null (the same backbone at random init); after each run
    yield its name, its run directory and its wall seconds."""
    checkpoint = args.checkpoint
    if checkpoint is None:
        train("simclr_digits.yaml", args.out / "simclr")
        checkpoint = args.out / "simclr" / "checkpoint.torch"
    starts = {"SimCLR checkpoint": str(checkpoint.resolve()), "random init": "null"}
    for name, start in starts.items():
        run_dir = args.out / ("from_checkpoint" if start != "null" else "from_random_init")
        began = time.perf_counter()
        train(recipe, run_dir, f"{checkpoint_key}={start}")
        yield name, run_dir, time.perf_counter() - began


def main() -> int:
    args = parse_args(__doc__, "linear_eval_digits")
    print("| backbone | linear top-1 | linear top-5 | kNN top-1 |")
    print("|---|---|---|---|")
    runs = runs_from_both_starts("linear_eval_digits.yaml", "model.linear_eval.checkpoint", args)
    for name, run_dir, _ in runs:
        metrics = last_test_metrics(run_dir)
        print(
            f"| {name} | {metrics['top1']:.4f} | {metrics['top5']:.4f} "
            f"| {metrics['knn_top1']:.4f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

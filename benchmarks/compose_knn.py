"""kNN top-1 of every method with its composed defaults: the table of docs/compose.md.

    .venv/bin/python benchmarks/compose_knn.py --seeds 0 1 2
    .venv/bin/python benchmarks/compose_knn.py --seeds 0 --methods simclr dino

For each method and seed it runs ``hookbus train --method M --model X --data digits
--out OUT trainer.seed=S`` (the composed config, nothing else changed: the digits are
labelled, so the composed run has the kNN meter and the evaluation report on), with
``small_cnn`` for the methods that train any backbone and ``vit_tiny`` for those that
mask patch tokens, one run at a time, each in its own directory under ``--out`` (a run
already there with its ``evaluation.json`` is read, not trained again). It reads the
run's ``evaluation.json``: kNN top-1 (k=20, the train split as memory, 500 held-out
images) of the encoder at random init and trained, and prints one Markdown row per
method: the trained kNN over the seeds (mean, and each seed's), the random-init kNN
beside it, the gain, and the mean wall time of a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = (
    "simclr",
    "moco",
    "moco_v3",
    "byol",
    "swav",
    "dino",
    "dinov2",
    "ibot",
    "barlow_twins",
    "vicreg",
    "simsiam",
    "nnclr",
    "mae",
    "ijepa",
)
"""Every method ``--method`` takes."""

MASKING = ("dinov2", "ibot", "mae", "ijepa")
"""The methods that mask patch tokens: trained on the tiny ViT."""


def model_of(method: str) -> str:
    """The backbone a method is measured on: the tiny ViT for the masking methods."""
    return "vit_tiny" if method in MASKING else "small_cnn"


def run(method: str, seed: int, out: Path) -> tuple[dict, float]:
    """The evaluation of ``method`` at ``seed`` (trained here when missing), and the
    seconds its run took (0 for one read back)."""
    run_dir = out / f"{method}_seed{seed}"
    result = run_dir / "evaluation.json"
    seconds = 0.0
    if not result.is_file():
        command = [sys.executable, "-m", "hookbus", "train", "--method", method]
        command += ["--model", model_of(method), "--data", "digits", "--out", str(run_dir)]
        command += [f"trainer.seed={seed}", "-q"]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{method} seed {seed}: exit {done.returncode}: {done.stderr}")
    return json.loads(result.read_text()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "compose_knn")
    args = parser.parse_args()
    print("| method | backbone | kNN top-1 trained (seeds) | random init | gain | s/run |")
    print("|---|---|---|---|---|---|")
    for method in args.methods:
        trained, random, seconds = [], [], []
        for seed in args.seeds:
            result, took = run(method, seed, args.out)
            trained.append(result["trained"]["knn_top1"])
            random.append(result["random init"]["knn_top1"])
            if took:
                seconds.append(took)
        each = ", ".join(f"{value:.3f}" for value in trained)
        mean, base = statistics.mean(trained), statistics.mean(random)
        took = f"{statistics.mean(seconds):.0f}" if seconds else "-"
        print(
            f"| {method} | {model_of(method)} | {mean:.3f} ({each}) | {base:.3f} | "
            f"{mean - base:+.3f} | {took} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""kNN and linear-probe top-1 of every SSL method's digits recipe, as shipped, over seeds,
each trained run evaluated with ``hookbus eval``: the methods table.

    .venv/bin/python benchmarks/methods_digits.py --seeds 0 1 2
    .venv/bin/python benchmarks/methods_digits.py --seeds 0 --methods byol swav

For each method and seed it runs ``hookbus train configs/<method>_digits.yaml
trainer.seed=<seed>`` (the tiny-ViT recipes: ``RECIPES``, ``OVERRIDES``) in a fresh
run directory (under ``--out``, default ``runs/methods_digits``), one run at a time,
with the recipe's evaluation report switched off: ``hookbus eval RUN --k 20`` scores the
trained encoder on the run's own digits splits (kNN top-1 at k=20, weighted vote, the
1297 train images as memory and the 500 held-out images as queries; the linear probe on
the cached features, its learning rate and weight decay chosen on held-out train
images), and the same command scores the encoder at random init (the model built with
the run's seed, as the run built its own, saved as an exported backbone and evaluated
with the run's ``config.yaml`` as its recipe). A run directory that already holds both
``eval.json`` files is read, not trained again.

``--threads N`` runs every training with ``machine.num_threads=N`` and every evaluation
with ``OMP_NUM_THREADS=N``: on cores that other jobs keep busy, a pool of 2 torch
threads made the tiny ViT's steps 30 times slower than one thread (3.2 s a step against
the 0.1 s of an idle machine); a run's numbers may depend on its thread count.

It prints one Markdown row per method: the mean kNN top-1 over the seeds with its
spread (max - min) and the seeds' values, the linear probe, the random-init kNN and
probe, the kNN gain over random init, the mean wall time of a training run (process
start to exit), its mean CPU time (user + system) divided by the 2 cores the recipes are
sized for (on a machine whose cores are shared, the wall time grows with the other
load, the CPU time much less), and the mean wall time of one ``hookbus eval``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.eval_commands import (  # noqa: E402
    evaluate_initial,
    evaluate_run,
    knn_top1,
    probe_top1,
)

METHODS = (
    "simclr",
    "moco",
    "moco_v3",
    "byol",
    "swav",
    "dino",
    "barlow_twins",
    "vicreg",
    "simsiam",
    "nnclr",
    "mae",
    "dino_vit_tiny",
    "dinov2",
    "ibot",
    "ijepa",
    "dinov3",
    "dinov3_no_gram",
    "lejepa",
)
RECIPES = {
    "mae": "mae_digits_vit_tiny",
    "dino_vit_tiny": "dino_digits_vit_tiny",
    "ijepa": "ijepa_digits_vit_tiny",
    "dinov3": "dinov3_digits_vit_tiny",
    "dinov3_no_gram": "dinov3_digits_vit_tiny",
    "lejepa": "lejepa_digits_vit_tiny",
}
"""The recipe of each method whose digits recipe is not ``<method>_digits``."""
OVERRIDES = {"dinov3_no_gram": ["loss.dinov3.gram_weight=0"]}
"""Settings a row changes in its recipe: DINOv3 without Gram anchoring."""

CORES = 2
"""The cores the recipes' time budget (5 minutes a run) is for."""

HOOKBUS = str(ROOT / ".venv" / "bin" / "hookbus")


@dataclass(frozen=True)
class Run:
    """One seed of a method: the ``hookbus eval`` results of the trained and the
    random-init encoder, the training's wall and CPU seconds (0 for a run read back) and
    the mean wall seconds of an evaluation."""

    trained: dict[str, Any]
    initial: dict[str, Any]
    seconds: float
    cpu: float
    eval_seconds: float


def timed(command: list[str]) -> tuple[float, float]:
    """Run ``command`` (its output kept, shown when it fails, which stops the script): its
    wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def train_and_evaluate(
    run_dir: Path,
    initial_dir: Path,
    train: list[str],
    threads: int | None = None,
    data: tuple[str, ...] = (),
) -> Run:
    """``hookbus train TRAIN...`` into ``run_dir`` from scratch (unless both evaluations are
    there already), then ``hookbus eval`` of the trained encoder and of the same model at
    random init (results in ``initial_dir``), on the run's own splits or on ``data``."""
    results = (run_dir / "eval.json", initial_dir / "eval.json")
    seconds = cpu = evaluating = 0.0
    if not all(path.is_file() for path in results):
        for folder in (run_dir, initial_dir):
            shutil.rmtree(folder, ignore_errors=True)
        seconds, cpu = timed(
            [
                HOOKBUS,
                "train",
                *train,
                *([f"machine.num_threads={threads}"] if threads else []),
                f"checkpoint.dir={run_dir}",
                "hooks.evaluation_report.enabled=false",
                "hooks.progress_bar.enabled=false",
                "-q",
            ]
        )
        started = time.perf_counter()
        evaluate_run(run_dir, *data)
        evaluate_initial(run_dir, initial_dir, *data)
        evaluating = time.perf_counter() - started
    trained, initial = (json.loads(path.read_text()) for path in results)
    return Run(trained, initial, seconds, cpu, evaluating / 2)


def run(method: str, seed: int, out: Path, threads: int | None = None) -> Run:
    """Train ``method``'s recipe with ``seed`` and evaluate it (:func:`train_and_evaluate`)."""
    recipe = ROOT / "configs" / f"{RECIPES.get(method, f'{method}_digits')}.yaml"
    return train_and_evaluate(
        out / f"{method}_seed{seed}",
        out / f"{method}_seed{seed}_init",
        [str(recipe), f"trainer.seed={seed}", *OVERRIDES.get(method, [])],
        threads,
    )


def row(method: str, runs: list[Run]) -> str:
    """The Markdown table row of ``method``'s runs."""
    trained = [knn_top1(one.trained) for one in runs]
    mean = statistics.mean(trained)
    initial = statistics.mean(knn_top1(one.initial) for one in runs)
    per_seed = ", ".join(f"{value:.3f}" for value in trained)
    timed_runs = [one for one in runs if one.seconds]

    def average(values: list[float]) -> str:
        return f"{statistics.mean(values):.0f}" if values else "-"

    return (
        f"| {method} | {mean:.4f} ± {max(trained) - min(trained):.4f} | {per_seed} "
        f"| {statistics.mean(probe_top1(one.trained) for one in runs):.4f} | {initial:.4f} "
        f"| {statistics.mean(probe_top1(one.initial) for one in runs):.4f} "
        f"| {100 * (mean - initial):+.1f} "
        f"| {average([one.seconds for one in timed_runs])} "
        f"| {average([one.cpu / CORES for one in timed_runs])} "
        f"| {average([one.eval_seconds for one in timed_runs])} |"
    )


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: the torch threads of the runs and of the evaluations."""
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads of the runs (machine.num_threads) and of the evaluations "
        "(OMP_NUM_THREADS); default: the recipes' (the cores)",
    )


def use_threads(threads: int | None) -> None:
    """Give the evaluations (processes started from here) ``threads`` torch threads."""
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)


def print_header(first: str) -> None:
    """Print the Markdown table's header, ``first`` naming the rows (method, recipe)."""
    print(
        f"| {first} | kNN top-1 (k=20), mean ± spread | per seed | linear probe "
        "| random init kNN | random init probe | kNN gain (points) | train wall s/run "
        f"| train CPU s/run / {CORES} | eval wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "methods_digits")
    add_threads_option(parser)
    args = parser.parse_args()
    use_threads(args.threads)
    print_header("method")
    for method in args.methods:
        runs = [run(method, seed, args.out, args.threads) for seed in args.seeds]
        print(row(method, runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

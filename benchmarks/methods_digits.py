"""kNN top-1 of every SSL method's digits recipe, as shipped, over seeds: the methods table.

    .venv/bin/python benchmarks/methods_digits.py --seeds 0 1 2
    .venv/bin/python benchmarks/methods_digits.py --seeds 0 --methods byol swav

For each method and seed it runs ``hookbus train configs/<method>_digits.yaml
trainer.seed=<seed>`` (the tiny-ViT recipes: ``RECIPES``, ``OVERRIDES``) in a fresh
run directory (under ``--out``, default ``runs/methods_digits``), one run at a time, and
reads the run's ``evaluation.json`` (the evaluation-report hook: kNN top-1, k=20, with
the train split as memory, and the 10-labels-per-class probe, for the encoder at random
init and trained). It prints one Markdown row per method: the mean kNN top-1 over the
seeds with its spread (max - min) and the seeds' values, the probe, the random-init kNN
and probe, the kNN gain over random init, the mean wall time of a run (process start to
exit: data, training, test phases and the evaluation report) and its mean CPU time
(user + system) divided by the 2 cores the recipes are sized for: on a machine whose
cores are shared, the wall time grows with the other load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
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


def run(method: str, seed: int, out: Path) -> tuple[dict, float, float]:
    """Train ``method``'s recipe with ``seed`` from scratch: its evaluation, wall seconds
    and CPU seconds (user + system, the process and its children)."""
    run_dir = out / f"{method}_seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [
        str(ROOT / ".venv" / "bin" / "hookbus"),
        "train",
        str(ROOT / "configs" / f"{RECIPES.get(method, f'{method}_digits')}.yaml"),
        f"trainer.seed={seed}",
        *OVERRIDES.get(method, []),
        f"checkpoint.dir={run_dir}",
        "hooks.progress_bar.enabled=false",
        "-q",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads((run_dir / "evaluation.json").read_text()), seconds, cpu


def row(method: str, results: list[tuple[dict, float, float]]) -> str:
    """The Markdown table row of ``method``'s runs."""
    knn = [evaluation["trained"]["knn_top1"] for evaluation, _, _ in results]
    probe = [evaluation["trained"]["probe_top1"] for evaluation, _, _ in results]
    initial = [evaluation["random init"]["knn_top1"] for evaluation, _, _ in results]
    initial_probe = [evaluation["random init"]["probe_top1"] for evaluation, _, _ in results]
    seconds = [elapsed for _, elapsed, _ in results]
    cpu = [used / CORES for _, _, used in results]
    mean = statistics.mean(knn)
    gain = 100 * (mean - statistics.mean(initial))
    per_seed = ", ".join(f"{value:.3f}" for value in knn)
    return (
        f"| {method} | {mean:.4f} ± {max(knn) - min(knn):.4f} | {per_seed} "
        f"| {statistics.mean(probe):.4f} | {statistics.mean(initial):.4f} "
        f"| {statistics.mean(initial_probe):.4f} | {gain:+.1f} "
        f"| {statistics.mean(seconds):.0f} | {statistics.mean(cpu):.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "methods_digits")
    args = parser.parse_args()
    print(
        "| method | kNN top-1, mean ± spread | per seed | probe 10/class | random init kNN "
        f"| random init probe | kNN gain (points) | wall s/run | CPU s/run / {CORES} |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for method in args.methods:
        results = [run(method, seed, args.out) for seed in args.seeds]
        print(row(method, results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

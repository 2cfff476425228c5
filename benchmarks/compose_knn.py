"""kNN top-1 of every method with its composed defaults: the tables of docs/compose.md.

    .venv/bin/python benchmarks/compose_knn.py --seeds 0 1 2
    .venv/bin/python benchmarks/compose_knn.py --seeds 0 --methods simclr dino
    .venv/bin/python benchmarks/compose_knn.py --data photos --seeds 0 1 2

For each method and seed it runs ``hookbus train --method M --model X --data DATA --out
OUT trainer.seed=S`` (the composed config), with ``small_cnn`` for the methods that
train any backbone and ``vit_tiny`` for those that mask patch tokens (those whose
composition refuses the small CNN), one run at a time, each in its own directory under
``--out``; a run already there with its results is read, not trained again.

``--data digits`` (the default): nothing else changed. The digits are labelled, so the
composed run has the kNN meter and the evaluation report on; the script reads the run's
``evaluation.json``: kNN top-1 (k=20, the train split as memory, 500 held-out images) of
the encoder at random init and trained.

``--data photos``: a labelled folder of 1,000 crops of eight real photographs
(:mod:`benchmarks.photo_crops`, under ``--out``); the run trains on its ``train/``
folder, read without labels as any photo folder is, shortened to ``--epochs`` epochs of
``--image-size`` pixel views (the composed settings otherwise); then ``hookbus eval RUN
FOLDER --k 20`` scores the trained encoder and the same model at random init
(:mod:`benchmarks.eval_commands`) on the folder's 800 train and 200 test crops.

It prints one Markdown row per method: the trained kNN over the seeds (mean, and each
seed's), the random-init kNN beside it, the gain, and the mean wall time of a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.eval_commands import evaluate_initial, evaluate_run, knn_top1  # noqa: E402
from benchmarks.photo_crops import write_folder  # noqa: E402
from hookbus.compose import compose, method_names  # noqa: E402
from hookbus.engine.errors import ConfigError  # noqa: E402

METHODS = tuple(name for name in method_names() if name != "distillation")
"""Every method ``--method`` takes but distillation, which learns a teacher the user
names (measured in docs/guides/foundation-models.md)."""


@cache
def model_of(method: str) -> str:
    """The backbone a method is measured on: the small CNN, or the tiny ViT for the
    methods that mask patch tokens (their composition refuses the CNN)."""
    try:
        compose(method, "small_cnn", laptop=True)
    except ConfigError:
        return "vit_tiny"
    return "small_cnn"


def train(method: str, seed: int, data: Path | str, run_dir: Path, extra: list[str]) -> float:
    """Train the composed run; its wall seconds."""
    command = [sys.executable, "-m", "hookbus", "train", "--method", method]
    command += ["--model", model_of(method), "--data", str(data), "--out", str(run_dir)]
    command += [f"trainer.seed={seed}", *extra, "-q"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{method} seed {seed}: exit {done.returncode}: {done.stderr}")
    return time.perf_counter() - started


def run_digits(method: str, seed: int, out: Path) -> tuple[float, float, float]:
    """kNN top-1 trained and at random init of ``method`` at ``seed`` on the digits (from
    the run's ``evaluation.json``; trained here when missing), and the seconds its run
    took (0 for one read back)."""
    run_dir = out / f"{method}_seed{seed}"
    result = run_dir / "evaluation.json"
    seconds = 0.0 if result.is_file() else train(method, seed, "digits", run_dir, [])
    found = json.loads(result.read_text())
    return found["trained"]["knn_top1"], found["random init"]["knn_top1"], seconds


def run_photos(
    method: str, seed: int, out: Path, epochs: int, image_size: int
) -> tuple[float, float, float]:
    """kNN top-1 trained and at random init of ``method`` at ``seed`` on the photo folder
    (``hookbus eval``; trained and evaluated here when missing), and the seconds of its
    run, evaluations included (0 for one read back)."""
    folder = out / "photos"
    if not (folder / "test").is_dir():
        write_folder(folder, size=96)
    run_dir = out / f"{method}_seed{seed}"
    initial_dir = out / f"{method}_seed{seed}_init"
    seconds = 0.0
    if not ((run_dir / "eval.json").is_file() and (initial_dir / "eval.json").is_file()):
        started = time.perf_counter()
        extra = [f"optimizer.num_epochs={epochs}", f"data.image_size={image_size}"]
        extra += ["hooks.progress_bar.enabled=false", "checkpoint.change_finished=true"]
        train(method, seed, folder / "train", run_dir, extra)
        evaluate_run(run_dir, str(folder))
        evaluate_initial(run_dir, initial_dir, str(folder))
        seconds = time.perf_counter() - started
    trained = json.loads((run_dir / "eval.json").read_text())
    initial = json.loads((initial_dir / "eval.json").read_text())
    return knn_top1(trained), knn_top1(initial), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--data", choices=("digits", "photos"), default="digits")
    parser.add_argument("--epochs", type=int, default=5, help="photos: epochs of a run (5)")
    parser.add_argument("--image-size", type=int, default=32, help="photos: the views' pixels (32)")
    parser.add_argument("--out", type=Path, help="default: runs/compose_knn[_photos]")
    args = parser.parse_args()
    suffix = "" if args.data == "digits" else "_photos"
    out = args.out or ROOT / "runs" / f"compose_knn{suffix}"
    print("| method | backbone | kNN top-1 trained (seeds) | random init | gain | s/run |")
    print("|---|---|---|---|---|---|")
    for method in args.methods:
        trained, random, seconds = [], [], []
        for seed in args.seeds:
            if args.data == "digits":
                knn, initial, took = run_digits(method, seed, out)
            else:
                knn, initial, took = run_photos(method, seed, out, args.epochs, args.image_size)
            trained.append(knn)
            random.append(initial)
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

"""1 process vs 2, and hookbus's launcher vs torchrun, on the digits SimCLR recipe.

    .venv/bin/python benchmarks/bench_distributed.py --epochs 5 --repeats 2

Runs `hookbus train configs/simclr_digits.yaml` three ways, alternating them, with the
same global batch (256) and no thread setting of its own (`machine.num_threads` is left
at 0, torch's choice), so each launcher's default is what is measured:

- 1 process, batch 256;
- 2 processes started by hookbus itself (`distributed.nproc_per_node=2`), 128 each;
- 2 processes started by `torchrun --standalone --nproc_per_node=2 -m hookbus`, 128 each.

It prints the wall time of each (process start included), images per second over the
train epochs, and two ratios: 2-process / 1-process throughput, and the hookbus
launcher's wall time / torchrun's (the target is within 10%: <= 1.10).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
TRAIN_IMAGES_PER_EPOCH = 1280  # 5 batches of 256, the last partial batch dropped
TORCHRUN = Path(sys.executable).with_name("torchrun")

CONTENDERS = ("1 process", "2, hookbus launcher", "2, torchrun")


def command(contender: str, epochs: int, run_dir: Path) -> list[str]:
    """The command line of one contender's run."""
    processes = 1 if contender == "1 process" else 2
    overrides = [
        f"checkpoint.dir={run_dir}",
        f"optimizer.num_epochs={epochs}",
        f"data.batch_size={256 // processes}",
        "distributed.backend=gloo",
        "trainer.test_model=false",
        "hooks.evaluation_report.enabled=false",
        "hooks.progress_bar.enabled=false",
    ]
    if contender == "2, hookbus launcher":
        overrides.append("distributed.nproc_per_node=2")
    if contender == "2, torchrun":
        launcher = [str(TORCHRUN), "--standalone", "--nproc_per_node=2", "-m", "hookbus"]
    else:
        launcher = [sys.executable, "-m", "hookbus"]
    return [*launcher, "train", str(RECIPE), *overrides, "-q"]


def run(contender: str, epochs: int, workdir: Path) -> float:
    """Seconds one training run takes, start to exit."""
    run_dir = workdir / f"run_{time.monotonic_ns()}"
    started = time.monotonic()
    subprocess.run(command(contender, epochs, run_dir), cwd=ROOT, check=True, capture_output=True)
    elapsed = time.monotonic() - started
    shutil.rmtree(run_dir, ignore_errors=True)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not TORCHRUN.exists():
        sys.exit(f"bench_distributed: {TORCHRUN} not found (it comes with torch)")
    times: dict[str, list[float]] = {contender: [] for contender in CONTENDERS}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeats):
            for contender in CONTENDERS:
                times[contender].append(run(contender, args.epochs, Path(workdir)))
    images = args.epochs * TRAIN_IMAGES_PER_EPOCH
    wall = {contender: statistics.median(samples) for contender, samples in times.items()}
    print(f"{'contender':<22} {'wall s (median)':>16} {'images/s':>10}")
    for contender in CONTENDERS:
        print(f"{contender:<22} {wall[contender]:>16.1f} {images / wall[contender]:>10.0f}")
    scaling = wall["1 process"] / wall["2, hookbus launcher"]
    print(f"2-process throughput / 1-process throughput: {scaling:.2f}")
    launcher = wall["2, hookbus launcher"] / wall["2, torchrun"]
    print(f"hookbus launcher wall time / torchrun's: {launcher:.2f} (target <= 1.10)")


if __name__ == "__main__":
    main()

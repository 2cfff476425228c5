"""2 processes vs 1 on the digits SimCLR recipe, same global batch, side by side.

    .venv/bin/python benchmarks/bench_distributed.py --epochs 5 --repeats 2

Runs `hookbus train configs/simclr_digits.yaml` with 1 process (batch 256) and with
`distributed.nproc_per_node=2` (gloo, batch 128 per process, 256 in all), alternating
the two, and prints the wall time of each run (process start included) and images per
second over the train epochs, with the 2-process/1-process ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
TRAIN_IMAGES_PER_EPOCH = 1280  # 5 batches of 256, the last partial batch dropped


def run(processes: int, epochs: int, workdir: Path) -> float:
    """Seconds one training run takes, start to exit."""
    per_process = 256 // processes
    command = [
        sys.executable,
        "-m",
        "hookbus",
        "train",
        str(RECIPE),
        f"checkpoint.dir={workdir / f'run{processes}_{time.monotonic_ns()}'}",
        f"optimizer.num_epochs={epochs}",
        f"data.batch_size={per_process}",
        f"distributed.nproc_per_node={processes}",
        "distributed.backend=gloo",
        f"machine.num_threads={2 // processes}",
        "trainer.test_model=false",
        "hooks.evaluation_report.enabled=false",
        "hooks.progress_bar.enabled=false",
        "-q",
    ]
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    times: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeats):
            for processes in (1, 2):
                times[processes].append(run(processes, args.epochs, Path(workdir)))
    images = args.epochs * TRAIN_IMAGES_PER_EPOCH
    print(f"{'processes':<10} {'wall s (median)':>16} {'images/s':>10}")
    for processes, samples in times.items():
        wall = statistics.median(samples)
        print(f"{processes:<10} {wall:>16.1f} {images / wall:>10.0f}")
    ratio = statistics.median(times[1]) / statistics.median(times[2])
    print(f"2-process throughput / 1-process throughput: {ratio:.2f}")


if __name__ == "__main__":
    main()

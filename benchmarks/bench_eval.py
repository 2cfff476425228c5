"""Where ``hookbus eval``'s time goes on 1,000 real photographs: the share outside feature
extraction, printed as a ratio (the target is under 0.10).

    .venv/bin/python benchmarks/bench_eval.py
    .venv/bin/python benchmarks/bench_eval.py --backbone small_cnn --rounds 1

The labelled folder holds 1,000 JPEG crops (random position, scale, aspect and flip,
shorter side ``--size`` pixels) of eight photographs that ship with scikit-learn
(``china``, ``flower``) and scikit-image (``astronaut``, ``chelsea``, ``coffee``,
``rocket``, ``motorcycle_left``, ``hubble_deep_field``), one class per photograph:
100 train and 25 test crops of each. The encoder is a run directory holding
``--backbone`` at random init (speed does not depend on the weights) at
``--image-size``. Each round runs the command as a user does, in a fresh process and
with a fresh output folder (no cached features)::

    hookbus eval RUN FOLDER --out OUT

with every part at its default (kNN at k=10, 20, 200, the linear probe's grid, the
low-shot probes, retrieval). It reads the seconds of each part from the ``eval.json``
the command writes, beside the process's own wall time, and prints per round and as
medians: the extraction's seconds, the other parts', and the share outside extraction,
both of :func:`hookbus.evaluate`'s time and of the whole command's (process start,
imports and exit included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import machine, markdown_table, median  # noqa: E402
from benchmarks.photo_crops import write_folder  # noqa: E402
from tests.eval_runs import write_run  # noqa: E402

PARTS = ("knn", "linear", "low_shot", "retrieval", "cache_write", "load")
"""The parts of ``eval.json``'s ``seconds`` besides ``extract`` and ``total``."""


def settings(folder: Path, backbone: str, image_size: int, workers: int) -> dict[str, Any]:
    """A run on the photo folder with ``backbone`` at ``image_size`` px."""
    head = {"small_cnn": 128, "resnet18": 512, "vit_tiny": 64}[backbone]
    return {
        "data": {
            "name": "image_folder",
            "pipeline": "crop_first",
            "image_size": image_size,
            "num_workers": workers,
            "folder": {
                "train_dir": str(folder / "train"),
                "test_dir": str(folder / "test"),
                "labels": "class_folders",
            },
        },
        "model": {
            "backbone": {"name": backbone, "in_channels": 3},
            "head": {"dims": [head, 128, 64]},
        },
    }


def one_round(run_dir: Path, folder: Path, out: Path) -> dict[str, float]:
    """One ``hookbus eval`` process: its parts' seconds (``eval.json``) and its wall time."""
    command = [sys.executable, "-m", "hookbus", "eval", str(run_dir), str(folder)]
    command += ["--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"hookbus eval: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    seconds = json.loads((out / "eval.json").read_text())["seconds"]
    return {
        **{part: seconds.get(part, 0.0) for part in PARTS},
        "extract": seconds["extract"],
        "total": seconds["total"],
        "command": wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backbone", choices=("resnet18", "small_cnn", "vit_tiny"), default="resnet18"
    )
    parser.add_argument("--image-size", type=int, default=64, help="the run's image size (64)")
    parser.add_argument("--size", type=int, default=96, help="the crops' shorter side (96)")
    parser.add_argument("--workers", type=int, default=1, help="the run's loader workers (1)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_folder(Path(scratch) / "photos", args.size)
        run_dir = Path(scratch) / "run"
        write_run(run_dir, settings(folder, args.backbone, args.image_size, args.workers))
        rounds = [
            one_round(run_dir, folder, Path(scratch) / f"out{index}")
            for index in range(args.rounds)
        ]
    header = [
        "round",
        "extract s",
        *(f"{part} s" for part in PARTS),
        "evaluate s",
        "outside / evaluate",
        "command s",
        "outside / command",
    ]
    rows = []
    for name, values in [
        *((str(i), r) for i, r in enumerate(rounds)),
        ("median", {key: median([r[key] for r in rounds]) for key in rounds[0]}),
    ]:
        rows.append(
            [
                name,
                f"{values['extract']:.2f}",
                *(f"{values[part]:.2f}" for part in PARTS),
                f"{values['total']:.2f}",
                f"{1 - values['extract'] / values['total']:.3f}",
                f"{values['command']:.2f}",
                f"{1 - values['extract'] / values['command']:.3f}",
            ]
        )
    print(
        f"hookbus eval on 1,000 photographs ({args.backbone} at {args.image_size} px, "
        f"{args.workers} loader workers), every part at its default:"
    )
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Continued pretraining on real photographs: a run from a weights file against the same run
from random weights, kNN and a 10-per-class linear probe on the labelled photo folder.

The folder is the quickstart's (``tests/photos.py``: random crops of scikit-learn's two
sample photographs, 100 train and 100 test images per class, 112 px). No network, so the
weights file is made here: a first run of the method's continuation recipe from random
weights (``--source-epochs``, seed 100) writes ``checkpoint.torch``, which
``model.backbone.weights`` reads (the backbone only). Then, per seed, the recipe runs
``--epochs`` epochs from that file and as many from random weights, each ending with the
evaluation report (kNN top-1 and the probe, the start and the trained encoder).

    python benchmarks/continued_photos.py --methods dinov2 dinov3 --seeds 0 1 2

prints each run's figures as it ends and a markdown table at the end, and writes
``OUT/continued_photos.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.photos import make_photo_folder

SETUPS = {
    # method: (recipe, overrides that size it for a 2-core CPU)
    "dinov2": (
        "dinov2_continue_vit_s14",
        ["data.image_size=56", "data.small_views.size=28"],  # 4x4 and 2x2 grids
    ),
    "dinov3": (
        "dinov3_continue_vit_s16",
        [
            "model.backbone.name=timm:vit_tiny_patch16_dinov3_qkvb",
            "data.image_size=64",  # 4x4 and 2x2 grids
            "data.small_views.size=32",
        ],
    ),
}


def train(recipe: str, run: Path, overrides: list[str]) -> dict:
    """``hookbus train`` of ``recipe`` into ``run``; its evaluation report."""
    started = time.monotonic()
    command = ["hookbus", "train", recipe, f"checkpoint.dir={run}", *overrides, "-q"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}")
    report = json.loads((run / "evaluation.json").read_text())
    print(f"  {run.name}: {time.monotonic() - started:.0f} s, {json.dumps(report)}", flush=True)
    return report


def seed_figures(reports: list[dict]) -> tuple[str, float, list[float]]:
    """Of the evaluation reports of one run's seeds: each seed's kNN top-1 at the start and
    trained (``start->trained``), the trained kNN's mean, and each seed's trained probe."""
    start = [report["random init"]["knn_top1"] for report in reports]
    knn = [report["trained"]["knn_top1"] for report in reports]
    probe = [report["trained"]["probe_top1"] for report in reports]
    seeds = " ".join(f"{a:.3f}->{b:.3f}" for a, b in zip(start, knn, strict=True))
    return seeds, statistics.mean(knn), probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["dinov2"], choices=sorted(SETUPS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--source-epochs", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("runs/continued_photos"))
    args = parser.parse_args()
    photos = make_photo_folder(args.out / "photos", per_class=100, size=112)
    common = [
        f"data.folder.train_dir={photos / 'train'}",
        f"data.folder.test_dir={photos / 'test'}",
        "hooks.evaluation_report.enabled=true",
        "trainer.test_every_num_epochs=1000",
    ]
    results: dict[str, dict] = {}
    for method in args.methods:
        recipe, sized = SETUPS[method]
        print(f"== {method}: {recipe} {' '.join(sized)}", flush=True)
        base = [*common, *sized]
        source = args.out / f"{method}_source"
        train(
            recipe,
            source,
            [
                *base,
                "model.backbone.weights=null",
                "trainer.seed=100",
                f"optimizer.num_epochs={args.source_epochs}",
                "optimizer.lr=0.0005",
            ],
        )
        rows: dict[str, list[dict]] = {"from weights": [], "from random": []}
        for seed in args.seeds:
            for label, weights in (
                ("from weights", source / "checkpoint.torch"),
                ("from random", None),
            ):
                run = args.out / f"{method}_{label.split()[1]}_s{seed}"
                rows[label].append(
                    train(
                        recipe,
                        run,
                        [
                            *base,
                            f"model.backbone.weights={weights or 'null'}",
                            f"trainer.seed={seed}",
                            f"optimizer.num_epochs={args.epochs}",
                        ],
                    )
                )
        results[method] = rows
    (args.out / "continued_photos.json").write_text(json.dumps(results, indent=2))
    print(
        "\n| method | start | kNN top-1 (start -> trained), seeds | mean | probe 10/class, mean |"
    )
    print("|---|---|---|---|---|")
    for method, rows in results.items():
        for label, reports in rows.items():
            seeds, knn, probe = seed_figures(reports)
            print(f"| {method} | {label} | {seeds} | {knn:.3f} | {statistics.mean(probe):.3f} |")


if __name__ == "__main__":
    main()

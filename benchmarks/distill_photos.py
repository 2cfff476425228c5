"""Distillation and continued training on real photographs: a small student distilled from
a teacher that hookbus trained, against the same student trained by SimCLR from scratch for
as many epochs, and against the same SimCLR run started from a trained model's weights;
kNN and a 10-per-class linear probe on a labelled folder of photographs.

The folder is :mod:`benchmarks.photo_crops`'s: 1,000 crops of eight photographs that ship
with scikit-learn and scikit-image, one class each, 800 train and 200 test images, written
at ``--image-size`` pixels. The teacher is ``simclr_imagefolder_resnet18_small`` (a
ResNet-18) trained for ``--teacher-epochs`` on the train folder at seed 100. Per seed, the
student (hookbus's small CNN, ``--width``: 4 x width features) is trained ``--epochs``
epochs two ways, with the recipe's data, views, optimizer and schedule: distilled from the
teacher's checkpoint (``loss.name: distillation``, global loss, the run's own projection
instead of ``model.head``), by SimCLR (the recipe with the student's backbone), and by
SimCLR from the weights (``model.backbone.weights``) of a SimCLR run of the same student
trained ``--source-epochs`` at seed 100. Each run ends with its evaluation report (kNN
top-1, k 20, and the probe; the start, which is the loaded weights for a run from
weights, and the trained encoder). A run whose directory holds its report already is
read back, not trained again.

    python benchmarks/distill_photos.py --seeds 0 1 2

prints each run's figures as it ends and a markdown table at the end, and writes
``OUT/distill_photos.json`` and the two configs it trains (``OUT/*.yaml``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.continued_photos import seed_figures, train  # noqa: E402
from benchmarks.photo_crops import write_folder  # noqa: E402

RECIPE = ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml"
"""The teacher's recipe, and the students' data, optimizer and schedule."""


def student_configs(out: Path, width: int, teacher: Path) -> tuple[Path, Path]:
    """The SimCLR student's and the distilled student's configs, written under ``out``:
    the recipe with the small CNN of ``width`` as backbone; the distilled one with the
    distillation loss (the teacher: the recipe's ResNet-18 with ``teacher``'s weights)
    and no ``model.head``."""
    recipe = yaml.safe_load(RECIPE.read_text())
    backbone = {"name": "small_cnn", "width": width, "in_channels": 3}
    simclr = {**recipe, "model": {**recipe["model"], "backbone": backbone}}
    distilled = {
        **recipe,
        "model": {"backbone": backbone},
        "loss": {
            "name": "distillation",
            "distillation": {
                "mode": "global",
                "queue_size": 512,
                "temperature": 0.07,
                "teacher": {**recipe["model"]["backbone"], "weights": str(teacher)},
            },
        },
    }
    paths = (out / "student_simclr.yaml", out / "student_distilled.yaml")
    for path, config in zip(paths, (simclr, distilled), strict=True):
        path.write_text(yaml.safe_dump(config, sort_keys=False))
    return paths


def trained(config: str, run: Path, overrides: list[str]) -> dict:
    """The evaluation report of ``run``: read back when the run has one, else trained."""
    report = run / "evaluation.json"
    if report.exists():
        print(f"  {run.name}: read back, {report.read_text()}", flush=True)
        return json.loads(report.read_text())
    return train(config, run, overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--teacher-epochs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--source-epochs", type=int, default=6)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("runs/distill_photos"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    photos = write_folder(args.out / "photos", size=args.image_size)
    common = [
        f"data.folder.train_dir={photos / 'train'}",
        f"data.folder.test_dir={photos / 'test'}",
        f"data.image_size={args.image_size}",
        "hooks.evaluation_report.enabled=true",
        "trainer.test_every_num_epochs=1000",
    ]
    teacher = args.out / "teacher"
    print(f"== teacher: {RECIPE.name}, {args.teacher_epochs} epochs", flush=True)
    teacher_report = trained(
        str(RECIPE),
        teacher,
        [*common, "trainer.seed=100", f"optimizer.num_epochs={args.teacher_epochs}"],
    )
    simclr, distilled = student_configs(args.out, args.width, teacher / "checkpoint.torch")
    source = args.out / "simclr_source"
    print(f"== source of the continued runs: {args.source_epochs} epochs", flush=True)
    trained(
        str(simclr),
        source,
        [*common, "trainer.seed=100", f"optimizer.num_epochs={args.source_epochs}"],
    )
    arms = {
        "distilled": (distilled, "distilled", []),
        "SimCLR from scratch": (simclr, "simclr", []),
        "SimCLR from the source's weights": (
            simclr,
            "continued",
            [f"model.backbone.weights={source / 'checkpoint.torch'}"],
        ),
    }
    rows: dict[str, list[dict]] = {label: [] for label in arms}
    for seed in args.seeds:
        for label, (config, prefix, extra) in arms.items():
            overrides = [*common, f"trainer.seed={seed}", f"optimizer.num_epochs={args.epochs}"]
            rows[label].append(
                trained(str(config), args.out / f"{prefix}_s{seed}", overrides + extra)
            )
    results = {"teacher": teacher_report, "students": rows}
    (args.out / "distill_photos.json").write_text(json.dumps(results, indent=2))
    print(
        f"\n| run ({args.epochs} epochs) | kNN top-1 (start -> trained), seeds | mean "
        "| probe 10/class, seeds | mean |"
    )
    print("|---|---|---|---|---|")
    for label, reports in rows.items():
        seeds, knn, probe = seed_figures(reports)
        print(
            f"| width {args.width}, {label} | {seeds} | {knn:.3f} | "
            f"{' '.join(f'{p:.3f}' for p in probe)} | {statistics.mean(probe):.3f} |"
        )
    final = teacher_report["trained"]
    print(
        f"| teacher, ResNet-18, {args.teacher_epochs} epochs of SimCLR | "
        f"{teacher_report['random init']['knn_top1']:.3f}->{final['knn_top1']:.3f} | | "
        f"{final['probe_top1']:.3f} | |"
    )


if __name__ == "__main__":
    main()

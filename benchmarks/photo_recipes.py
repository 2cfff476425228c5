"""kNN and linear-probe top-1 of the shipped photo recipes on real photographs, over
seeds, each trained run evaluated with ``hookbus eval``: the photo rows of the methods
table.

    .venv/bin/python benchmarks/photo_recipes.py --seeds 0 1 2 --threads 1

For each recipe and seed it runs ``hookbus train configs/<recipe>.yaml
trainer.seed=<seed>`` on the labelled folder of :mod:`benchmarks.photo_crops` (1,000
crops of eight photographs that ship with scikit-learn and scikit-image, 800 to train
and 200 to test, one class per photograph; written under ``--out`` at 96 px, the small
recipe's view size), in a fresh run directory, one run at a time, with the recipe's
evaluation report switched off. ``hookbus eval RUN FOLDER --k 20`` scores the trained
encoder (kNN top-1 at k=20, weighted vote, the 800 train crops as memory and the 200
test crops as queries; the linear probe on the cached features, its learning rate and
weight decay chosen on held-out train crops), and the same command scores the encoder
at random init (built with the run's seed, as the run built its own). A run directory
that already holds both ``eval.json`` files is read, not trained again.

The default recipe is the one sized for a laptop, ``simclr_imagefolder_resnet18_small``
(a ResNet-18 at 96 px, 20 epochs); ``--recipes`` names others (the ResNet-50 and ViT
recipes train at 224 px and are sized for GPUs). ``--threads N`` runs every training
with ``machine.num_threads=N`` and every evaluation with ``OMP_NUM_THREADS=N``.

It prints one Markdown row per recipe, with the columns of
``benchmarks/methods_digits.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.methods_digits import (  # noqa: E402
    Run,
    add_threads_option,
    print_header,
    row,
    train_and_evaluate,
    use_threads,
)
from benchmarks.photo_crops import write_folder  # noqa: E402

RECIPES = ("simclr_imagefolder_resnet18_small",)
"""The photo recipes a laptop can train in minutes."""

IMAGE_SIZE = 96
"""The crops' pixels: the small recipe's view size."""


def run(recipe: str, seed: int, out: Path, folder: Path, threads: int | None) -> Run:
    """Train ``recipe`` with ``seed`` on ``folder`` and evaluate the trained and the
    random-init encoder on it (:func:`benchmarks.methods_digits.train_and_evaluate`)."""
    return train_and_evaluate(
        out / f"{recipe}_seed{seed}",
        out / f"{recipe}_seed{seed}_init",
        [
            str(ROOT / "configs" / f"{recipe}.yaml"),
            f"trainer.seed={seed}",
            f"data.folder.train_dir={folder / 'train'}",
            f"data.folder.test_dir={folder / 'test'}",
        ],
        threads,
        (str(folder),),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES))
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "photo_recipes")
    add_threads_option(parser)
    args = parser.parse_args()
    for recipe in args.recipes:
        if not (ROOT / "configs" / f"{recipe}.yaml").is_file():
            parser.error(f"--recipes: no recipe configs/{recipe}.yaml")
    use_threads(args.threads)
    folder = args.out / "photos"
    if not (folder / "test").is_dir():
        write_folder(folder, size=IMAGE_SIZE)
    print_header("recipe")
    for recipe in args.recipes:
        runs = [run(recipe, seed, args.out, folder, args.threads) for seed in args.seeds]
        print(row(recipe, runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

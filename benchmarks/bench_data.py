"""Data pipeline speed: images/s of the SSL view pipelines per worker count, and the
share of the digits recipe's step time spent waiting for data.

    .venv/bin/python benchmarks/bench_data.py            # workers 0 1 2, 3 rounds
    .venv/bin/python benchmarks/bench_data.py --quick    # a smoke run

Pipelines, each the train loader that ``build_data_loaders`` makes (sampler, collate,
views) at ``--batch-size`` images per batch:

==========================  ===========================================================
pipeline                    images and views
==========================  ===========================================================
batch, 2 views              the digits (1297 images, 16x16), batched augmentations
batch, multi-crop           the same plus ``--small-views`` small views (12x12)
torchvision, 2 views        a generated folder of JPEG files (``--folder-images``
                            images, 160x160), decoded with Pillow, per-image
                            ``transforms.v2`` views at 96x96
torchvision, multi-crop     the same plus ``--small-views`` small views (48x48)
==========================  ===========================================================

Images/s is one epoch's images over its wall time, the loader's persistent workers
already started (an untimed epoch first); pipelines and worker counts are measured in
alternation, ``--rounds`` times, and the median is shown.

The data-wait table trains the digits recipe (``configs/simclr_digits.yaml``: its
epochs cut to ``--epochs``, no test phase and no evaluation report) with the recipe's
own worker count and the other counts of ``--workers``, in alternation. Data wait is
the time the loop waits for a batch over the whole step time, summed over each train
phase, as the timing hook reports it; the median over phases and rounds is shown.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import interleaved, machine, markdown_table, median, quiet_training_log
from hookbus import Config, Hook, SSLTrainer, default_hooks, load_config
from hookbus.engine.config_io import validate_config
from hookbus.parts.data import build_data_loaders, set_loader_epoch

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "simclr_digits.yaml"


def write_image_folder(root: Path, count: int, size: int = 160) -> Path:
    """``count`` smooth random RGB JPEG images in two class folders under ``root``."""
    generator = torch.Generator().manual_seed(0)
    for index in range(count):
        folder = root / f"class{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        coarse = torch.rand(1, 3, 8, 8, generator=generator)
        image = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
        pixels = (image[0].permute(1, 2, 0) * 255).to(torch.uint8).numpy()
        Image.fromarray(pixels).save(folder / f"{index:05d}.jpg", quality=90)
    return root


def pipeline_configs(folder: Path, batch_size: int, small_views: int) -> dict[str, Config]:
    """The configs of the measured pipelines, by name (workers set later)."""
    digits = {"name": "digits", "batch_size": batch_size}
    images = {
        "name": "image_folder",
        "pipeline": "torchvision",
        "folder": {"train_dir": str(folder)},
        "image_size": 96,
        "batch_size": batch_size,
    }
    small_digits = {"count": small_views, "size": 12}
    small_images = {"count": small_views, "size": 48}
    raw = {
        "batch, 2 views": digits,
        "batch, multi-crop": {**digits, "small_views": small_digits},
        "torchvision, 2 views": images,
        "torchvision, multi-crop": {**images, "small_views": small_images},
    }
    return {
        name: validate_config({"data": data, "model": {"backbone": {"in_channels": 3}}}, name)
        for name, data in raw.items()
    }


def epoch_throughput(cfg: Config, workers: int) -> Callable[[], float]:
    """A contender: images/s of one epoch of ``cfg``'s train loader with ``workers``."""
    data = cfg.data.model_copy(update={"num_workers": workers})
    loader = build_data_loaders(cfg.model_copy(update={"data": data}))["train"]
    epochs = iter(range(1_000_000))

    def one_epoch() -> float:
        set_loader_epoch(loader, next(epochs))
        started = time.perf_counter()
        images = sum(len(batch["index"]) for batch in loader)
        return images / (time.perf_counter() - started)

    one_epoch()  # starts the persistent workers; not timed
    return one_epoch


class PhaseDataWait(Hook):
    """Records each train phase's (data wait seconds, step seconds), after the last step."""

    priority = 1000

    def __init__(self) -> None:
        super().__init__()
        self.phases: list[tuple[float, float]] = []

    def on_phase_end(self, engine: Engine) -> None:
        state = engine.state
        if state.train:
            self.phases.append((sum(state.data_time), sum(state.batch_time)))


def recipe_run(workers: int, epochs: int) -> Callable[[], list[tuple[float, float]]]:
    """A contender: the digits recipe for ``epochs`` epochs with ``workers`` workers."""

    def run() -> list[tuple[float, float]]:
        with tempfile.TemporaryDirectory() as run_dir:
            cfg = load_config(
                RECIPE,
                [
                    f"optimizer.num_epochs={epochs}",
                    f"data.num_workers={workers}",
                    "trainer.test_model=false",
                    "hooks.evaluation_report.enabled=false",
                    "hooks.progress_bar.enabled=false",
                    f"checkpoint.dir={run_dir}",
                    "checkpoint.auto_resume=false",
                ],
            )
            probe = PhaseDataWait()
            SSLTrainer(cfg, hooks=[*default_hooks(cfg), probe]).train()
        return probe.phases

    return run


def main() -> None:
    quiet_training_log()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=3, help="alternated measurements")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch")
    parser.add_argument("--small-views", type=int, default=6, help="multi-crop small views")
    parser.add_argument("--folder-images", type=int, default=256, help="JPEG files")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the recipe runs")
    parser.add_argument("--quick", action="store_true", help="workers 0 1, 1 round, less data")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.rounds, args.folder_images, args.epochs = [0, 1], 1, 64, 2
    print(f"bench_data: {args.rounds} rounds; {machine()}")

    with tempfile.TemporaryDirectory() as folder:
        configs = pipeline_configs(
            write_image_folder(Path(folder), args.folder_images), args.batch_size, args.small_views
        )
        contenders = {
            (name, workers): epoch_throughput(cfg, workers)
            for name, cfg in configs.items()
            for workers in args.workers
        }
        rates = interleaved(
            {f"{name}|{workers}": run for (name, workers), run in contenders.items()},
            args.rounds,
        )
    header = ["pipeline", *(f"{w} workers" for w in args.workers)]
    rows = [
        [name, *(f"{median(rates[f'{name}|{w}']):.0f}" for w in args.workers)] for name in configs
    ]
    print("\nimages / second (median)")
    print(markdown_table(header, rows))

    recipe_workers = load_config(RECIPE).data.num_workers
    counts = [recipe_workers, *(w for w in args.workers if w != recipe_workers)]
    runs: dict[str, Any] = interleaved(
        {str(w): recipe_run(w, args.epochs) for w in counts}, args.rounds
    )
    rows = []
    for workers in counts:
        phases = [phase for run in runs[str(workers)] for phase in run]
        wait = median([data / step for data, step in phases])
        seconds = median([step for _, step in phases])
        label = f"{workers} (the recipe's)" if workers == recipe_workers else str(workers)
        rows.append([label, f"{100 * wait:.1f}%", f"{seconds:.2f}"])
    print(f"\ndigits recipe, {args.epochs} epochs per run: data wait per train phase (median)")
    print(markdown_table(["workers", "data wait", "epoch seconds"], rows))
    print("target: data wait under 5% with the recipe's workers")


if __name__ == "__main__":
    main()

"""Data pipeline speed: images/s of the SSL view pipelines per worker count, the
image-folder pipelines beside lightly's and a torchvision v1 one on photo-like JPEG files,
and the share of the digits recipe's step time spent waiting for data.

    .venv/bin/python benchmarks/bench_data.py            # workers 0 1 2, 3 rounds
    .venv/bin/python benchmarks/bench_data.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_data.py --only photos --rounds 5

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

The photo table runs the 224-px image-folder recipe ``--recipe`` (SimCLR's by default:
two views, crops of 8-100% of the area, the recipe's jitter, grayscale and blur) on a
generated folder of ``--photos`` photo-like JPEG files of 500x375
(:mod:`benchmarks.photo_folder`): hookbus's ``crop_first`` and ``torchvision``
pipelines, lightly's ``SimCLRTransform`` and a torchvision v1 PIL pipeline with the same
settings (:mod:`benchmarks.peer_pipelines`; lightly skipped with a message when it is not
installed), each a DataLoader of ``--photo-batch`` images, alternated, per worker count.
The process runs on one torch thread, so 0 workers is one core; the ratio column is
hookbus's ``crop_first`` over the best peer in the same column.

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
from benchmarks.peer_pipelines import lightly_transform, peer_loader, torchvision_v1_transform
from benchmarks.photo_folder import write_photo_folder
from hookbus import Config, Hook, SSLTrainer, default_hooks, load_config
from hookbus.config import validate_config
from hookbus.parts.data import build_data_loaders, set_loader_epoch

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
RECIPE = CONFIGS / "simclr_digits.yaml"
PHOTO_RECIPE = CONFIGS / "simclr_imagefolder_resnet50.yaml"


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
    return loader_throughput(loader)


def loader_throughput(loader: Any) -> Callable[[], float]:
    """A contender: images/s of one epoch of ``loader`` (batches whose third item, or
    ``"index"``, holds the images' indices)."""
    epochs = iter(range(1_000_000))

    def one_epoch() -> float:
        set_loader_epoch(loader, next(epochs))
        started = time.perf_counter()
        images = sum(
            len(batch["index"] if isinstance(batch, dict) else batch[2]) for batch in loader
        )
        return images / (time.perf_counter() - started)

    one_epoch()  # starts the persistent workers; not timed
    return one_epoch


def photo_contenders(
    recipe: Path, folder: Path, batch_size: int, workers: int
) -> dict[str, Callable[[], float]]:
    """The image-folder pipelines with ``recipe``'s settings on ``folder``, by name."""
    overrides = [f"data.folder.train_dir={folder}", f"data.folder.test_dir={folder}"]
    overrides += [f"data.batch_size={batch_size}"]
    overrides += [f"data.num_workers={workers}", "data.pin_memory=false"]
    cfg = load_config(recipe, [*overrides, "data.pipeline=crop_first"])
    contenders = {
        "hookbus crop_first": epoch_throughput(cfg, workers),
        "hookbus torchvision": epoch_throughput(
            load_config(recipe, [*overrides, "data.pipeline=torchvision"]), workers
        ),
    }
    files = sorted(folder.rglob("*.jpg"))
    lightly = lightly_transform(cfg)
    if lightly is not None:
        contenders["lightly SimCLRTransform"] = loader_throughput(
            peer_loader(files, lightly, batch_size, workers)
        )
    contenders["torchvision v1 PIL"] = loader_throughput(
        peer_loader(files, torchvision_v1_transform(cfg), batch_size, workers)
    )
    return contenders


def ratio_row(rates: dict[str, list[float]], workers: list[int], peers: list[str]) -> list[str]:
    """hookbus crop_first's images/s over the best of ``peers``', per worker count."""
    row = []
    for count in workers:
        ours = median(rates[f"hookbus crop_first|{count}"])
        row.append(f"{ours / max(median(rates[f'{peer}|{count}']) for peer in peers):.2f}")
    return row


def photo_table(args: argparse.Namespace) -> None:
    """Print the image-folder pipelines' images/s per worker count and hookbus's
    ratios to each peer and to the best peer."""
    torch.set_num_threads(1)
    if lightly_transform(load_config(args.recipe)) is None:
        print("lightly is not installed (pip install lightly, or the bench extra): skipped")
    with tempfile.TemporaryDirectory() as folder:
        write_photo_folder(Path(folder), args.photos)
        contenders = {
            f"{name}|{workers}": run
            for workers in args.workers
            for name, run in photo_contenders(
                args.recipe, Path(folder), args.photo_batch, workers
            ).items()
        }
        rates = interleaved(contenders, args.rounds)
    names = list(dict.fromkeys(key.split("|")[0] for key in rates))
    rows = [
        [name, *(f"{median(rates[f'{name}|{w}']):.0f}" for w in args.workers)] for name in names
    ]
    peers = [name for name in names if not name.startswith("hookbus")]
    for peer in peers:
        rows.append([f"crop_first / {peer}", *ratio_row(rates, args.workers, [peer])])
    rows.append(["crop_first / best peer", *ratio_row(rates, args.workers, peers)])
    print(
        f"\n{args.recipe.name}: {args.photos} JPEG files of 500x375, images/s (median of "
        f"{args.rounds}), one torch thread"
    )
    print(markdown_table(["pipeline", *(f"{w} workers" for w in args.workers)], rows))


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
    parser.add_argument("--photos", type=int, default=128, help="photo-like JPEG files")
    parser.add_argument("--photo-batch", type=int, default=32, help="images per photo batch")
    parser.add_argument("--recipe", type=Path, default=PHOTO_RECIPE, help="image-folder recipe")
    parser.add_argument(
        "--only", choices=["pipelines", "photos", "recipe"], help="one table of the three"
    )
    parser.add_argument("--quick", action="store_true", help="workers 0 1, 1 round, less data")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.rounds, args.folder_images, args.epochs = [0, 1], 1, 64, 2
        args.photos, args.photo_batch = 16, 8
    print(f"bench_data: {args.rounds} rounds; {machine()}")
    if args.only in (None, "photos"):
        photo_table(args)
        print(f"after the photo table: {machine()}")
    if args.only == "photos":
        return
    if args.only in (None, "pipelines"):
        pipeline_table(args)
    if args.only in (None, "recipe"):
        recipe_table(args)


def pipeline_table(args: argparse.Namespace) -> None:
    """Print the view pipelines' images/s per worker count."""

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


def recipe_table(args: argparse.Namespace) -> None:
    """Print the digits recipe's data wait per worker count."""
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

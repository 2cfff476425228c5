"""Embedding speed: images/s of ``hookbus embed`` on a folder of JPEG photographs, beside
the training pipeline's data rate on the same folder and a hand-written loop doing the
embedding's work.

    .venv/bin/python benchmarks/bench_embed.py                   # 500 JPEGs, workers 0 2
    .venv/bin/python benchmarks/bench_embed.py --backbone resnet18 --device cuda --workers 4 8

The folder is :func:`tests.photos.make_photo_folder`'s: random crops of scikit-learn's
two sample photographs, ``--images`` JPEG files with a shorter side of ``--size``
pixels. The encoder is a run's checkpoint of ``--backbone`` (random init: speed does not
depend on the weights) at ``--image-size``. Contenders, each one pass over the folder:

=====================  =============================================================
contender              what it does
=====================  =============================================================
hookbus embed          :func:`hookbus.embed_images` on the checkpoint with
                       ``--workers`` DataLoader workers (their start included), batch
                       ``--batch-size``: read, resize, center crop, normalise, encode
training pipeline      the run's train loader (``build_data_loaders``, ``--pipeline``,
                       two augmented views per image) over the same files, one epoch
                       after an untimed one (workers started), images/s of the data
                       alone, no model
hand-written loop      in one process: Pillow opens each file, torchvision's
                       resize / center crop / normalise, batches of ``--batch-size``
                       through the backbone in eval mode under ``inference_mode``
=====================  =============================================================

Contenders alternate, ``--rounds`` times, and medians are shown; the process runs on
``--threads`` torch threads (workers on one each). The ratio rows are embed's rate over
the others', per worker count (the hand loop has no workers: its one figure is the
denominator of every column).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from PIL import Image
from torchvision.transforms import v2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_data import epoch_throughput
from benchmarks.harness import interleaved, machine, markdown_table, median
from hookbus import Config, embed_images
from hookbus.config import validate_config
from hookbus.embed_source import load_encoder
from hookbus.engine.checkpoint.checkpoint_io import FORMAT, checkpoint_name, save_atomic
from hookbus.parts.data.crop_boxes import CENTER_CROP_FRACTION
from hookbus.parts.models import build_model
from tests.photos import make_photo_folder


def bench_config(
    folder: Path, backbone: str, image_size: int, pipeline: str, batch_size: int, width: int
) -> Config:
    """A run on the image files under ``folder`` with ``backbone`` at ``image_size``
    (``width``: the small CNN's)."""
    features = {"small_cnn": 4 * width, "resnet18": 512, "resnet50": 2048}[backbone]
    options = {"width": width} if backbone == "small_cnn" else {}
    return validate_config(
        {
            "data": {
                "name": "image_folder",
                "pipeline": pipeline,
                "image_size": image_size,
                "batch_size": batch_size,
                "drop_last": False,
                "pin_memory": False,
                "folder": {"train_dir": str(folder)},
            },
            "model": {
                "backbone": {"name": backbone, "in_channels": 3, **options},
                "head": {"dims": [features, 128, 64]},
            },
        },
        "embedding benchmark",
    )


def write_checkpoint(run_dir: Path, cfg: Config) -> Path:
    """A checkpoint of ``cfg``'s model at random init, as a run writes it."""
    torch.manual_seed(0)
    path = run_dir / checkpoint_name(0, 1)
    save_atomic(
        {
            "format": FORMAT,
            "phase_idx": 0,
            "train_phase_idx": 0,
            "iteration": 1,
            "iteration_num": 1,
            "model": build_model(cfg).state_dict(),
            "optimizer": {},
            "hooks": {},
            "config": cfg.model_dump(mode="json"),
        },
        path,
    )
    return path


def hand_loop(
    checkpoint: Path, files: Sequence[Path], batch_size: int, device: str
) -> Callable[[], float]:
    """A contender: images/s of Pillow, torchvision's transform and the backbone, in a
    plain loop in this process."""
    encoder = load_encoder(checkpoint)
    size, augment = encoder.config.data.image_size, encoder.config.data.torchvision
    transform = v2.Compose(
        [
            v2.PILToTensor(),
            v2.Resize(round(size / CENTER_CROP_FRACTION), antialias=True),
            v2.CenterCrop(size),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(augment.mean, augment.std),
        ]
    )
    backbone = encoder.backbone.to(device)

    def one_pass() -> float:
        started = time.perf_counter()
        with torch.inference_mode():
            for first in range(0, len(files), batch_size):
                images = [
                    transform(Image.open(path).convert("RGB"))
                    for path in files[first : first + batch_size]
                ]
                backbone(torch.stack(images).to(device)).cpu()
        return len(files) / (time.perf_counter() - started)

    return one_pass


def embed_contender(
    checkpoint: Path, folder: Path, batch_size: int, workers: int, device: str
) -> Callable[[], float]:
    """A contender: images/s that :func:`hookbus.embed_images` reports."""

    def one_pass() -> float:
        result = embed_images(
            checkpoint, folder, batch_size=batch_size, num_workers=workers, device=device
        )
        return result.images_per_second

    return one_pass


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=500, help="JPEG files (a multiple of 4)")
    parser.add_argument("--size", type=int, default=96, help="shorter side of each file")
    parser.add_argument("--image-size", type=int, default=64, help="the encoder's input side")
    parser.add_argument(
        "--backbone", choices=("small_cnn", "resnet18", "resnet50"), default="small_cnn"
    )
    parser.add_argument("--width", type=int, default=8, help="small_cnn: its width")
    parser.add_argument("--pipeline", choices=("crop_first", "torchvision"), default="crop_first")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of this process")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the images/s of each contender per worker count, and embed's ratios."""
    args = parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = make_photo_folder(
                Path(scratch) / "photos", per_class=max(1, args.images // 4), size=args.size
            )
            files = sorted(folder.rglob("*.jpg"))
            cfg = bench_config(
                folder, args.backbone, args.image_size, args.pipeline, args.batch_size, args.width
            )
            checkpoint = write_checkpoint(Path(scratch), cfg)
            contenders = {
                "hand-written loop": hand_loop(checkpoint, files, args.batch_size, args.device)
            }
            for workers in args.workers:
                contenders[f"hookbus embed|{workers}"] = embed_contender(
                    checkpoint, folder, args.batch_size, workers, args.device
                )
                contenders[f"training pipeline|{workers}"] = epoch_throughput(cfg, workers)
            rates = interleaved(contenders, args.rounds)
            where = machine()
    finally:
        torch.set_num_threads(threads)
    hand = median(rates["hand-written loop"])
    backbone = args.backbone + (f" (width {args.width})" if args.backbone == "small_cnn" else "")
    rows = []
    for name in ("hookbus embed", "training pipeline"):
        rows.append([name, *(f"{median(rates[f'{name}|{w}']):.0f}" for w in args.workers)])
    rows.append(["hand-written loop", *(f"{hand:.0f}" for _ in args.workers)])
    embed = [median(rates[f"hookbus embed|{w}"]) for w in args.workers]
    pipeline = [median(rates[f"training pipeline|{w}"]) for w in args.workers]
    ratios = [f"{e / p:.2f}" for e, p in zip(embed, pipeline, strict=True)]
    rows.append(["embed / training pipeline", *ratios])
    rows.append(["embed / hand-written loop", *(f"{e / hand:.2f}" for e in embed)])
    print(
        f"\n{len(files)} JPEG files (shorter side {args.size}), {backbone} at "
        f"{args.image_size} px on {args.device}, batch {args.batch_size}, images/s (median of "
        f"{args.rounds}); training pipeline: {args.pipeline}, 2 views, no model\n{where}"
    )
    print(markdown_table(["images/s", *(f"{w} workers" for w in args.workers)], rows))


if __name__ == "__main__":
    main()

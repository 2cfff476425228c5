"""Images/s of the train loader on MDS shards against the same images as a folder.

    python -m benchmarks.bench_shards                     # 256 photos, 0 and 1 workers
    python -m benchmarks.bench_shards --images 512 --workers 0 2 --rounds 5

The photos (benchmarks/photo_folder.py, 500x375 JPEG) are written once as a folder and,
by ``hookbus shard``'s writer, as shards; each round reads one epoch of each contender's
train loader (the views of the recipe's pipeline), in rotating order. Needs the
optional extra shards (``pip install 'hookbus[shards]'``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from benchmarks.bench_data import PHOTO_RECIPE, epoch_throughput
from benchmarks.harness import interleaved, machine, markdown_table, median
from benchmarks.photo_folder import write_photo_folder
from hookbus.config import load_config
from hookbus.shard import write_shards

PIPELINES = ("crop_first", "torchvision")
SHARD_BYTES = 4 << 20
"""Shards of at most 4 MiB: about 70 of the photos each, so an epoch crosses shards."""


def contenders(folder: Path, shards: Path, batch_size: int, workers: int) -> dict:
    """One epoch's images/s of each pipeline on the folder and on the shards, by name."""
    common = [f"data.batch_size={batch_size}", f"data.num_workers={workers}"]
    common += ["data.pin_memory=false"]
    sources = {
        "folder": [
            "data.name=image_folder",
            f"data.folder.train_dir={folder}",
            f"data.folder.test_dir={folder}",
        ],
        "shards": ["data.name=shards", f"data.shards.path={shards}"],
    }
    return {
        f"{source} {pipeline}": epoch_throughput(
            load_config(PHOTO_RECIPE, [*common, *overrides, f"data.pipeline={pipeline}"]),
            workers,
        )
        for pipeline in PIPELINES
        for source, overrides in sources.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256, help="photos to read (256)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per batch (32)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1], help="(0 1)")
    parser.add_argument("--rounds", type=int, default=3, help="epochs of each contender (3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_photo_folder(Path(tmp) / "photos", args.images)
        written = write_shards(folder, Path(tmp) / "shards", SHARD_BYTES)
        print(f"{machine()}; {args.images} photos, {written.shards} shards")
        rows = []
        for workers in args.workers:
            rates = interleaved(
                contenders(folder, Path(tmp) / "shards", args.batch_size, workers), args.rounds
            )
            for pipeline in PIPELINES:
                on_folder = median(rates[f"folder {pipeline}"])
                on_shards = median(rates[f"shards {pipeline}"])
                rows.append(
                    [
                        pipeline,
                        str(workers),
                        f"{on_folder:.0f}",
                        f"{on_shards:.0f}",
                        f"{on_shards / on_folder:.2f}",
                    ]
                )
        header = ["pipeline", "workers", "folder images/s", "shards images/s", "shards / folder"]
        print(markdown_table(header, rows))


if __name__ == "__main__":
    main()

"""GPU throughput: SimCLR on a ResNet-50 with bf16 autocast, hookbus against a hand loop.

    .venv/bin/python benchmarks/bench_gpu.py                   # needs a CUDA GPU
    .venv/bin/python benchmarks/bench_gpu.py --channels-last
    .venv/bin/python benchmarks/bench_gpu.py --quick           # fewer steps

Synthetic data: one batch of random images made on the GPU and fed again at every
step, so that the figures are the model's and the loop's, not a data pipeline's. The
model, loss and optimizer come from hookbus's builders for both contenders: a
torchvision ResNet-50 backbone with the SimCLR projection head (2048-2048-128),
NT-Xent, SGD with momentum; forward and loss under bf16 autocast.

* hand loop: forward, loss, zero_grad, backward, learning rate, optimizer step;
* hookbus: ``SSLTrainer.train`` with the standard train step and the default hooks (one
  train phase; a hook at ``on_start`` hands it the same synthetic batches).

Images/s counts images (two views each) over the steps after
``--warmup``, timed with a CUDA synchronisation at both ends only; the contenders run
in alternation, ``--rounds`` times, and the median is shown. Sized to stay well under
5 minutes on one recent GPU (four runs of 60 steps of 512 crops); ``--quick`` runs two of 30.
Exits with a message when CUDA is absent.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine
from torch.utils.data import Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import interleaved, machine, markdown_table, median, quiet_training_log
from hookbus import DATASETS, Config, Hook, SSLTrainer, default_hooks
from hookbus.config import validate_config
from hookbus.parts.losses import build_loss
from hookbus.parts.models import build_model
from hookbus.parts.optim import build_optimizer, learning_rate, set_learning_rate

DATASET_NAME = "bench_gpu_blank_images"


class BlankImages(Dataset):
    """``length`` blank images, made on demand: hookbus plans its phase and checks its
    model with this data set; the task hook then feeds it the synthetic batches."""

    def __init__(self, length: int, channels: int, size: int) -> None:
        self.length, self.channels, self.size = length, channels, size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        return torch.zeros(self.channels, self.size, self.size), 0, index


@DATASETS.register(DATASET_NAME)
def _blank_images(cfg: Any) -> tuple[BlankImages, BlankImages]:
    channels, size = cfg.synthetic.channels, cfg.image_size
    return BlankImages(cfg.synthetic.train_size, channels, size), BlankImages(1, channels, size)


def bench_config(
    *,
    steps: int,
    batch_size: int = 256,
    image_size: int = 224,
    views: int = 2,
    backbone: str = "resnet50",
    head: tuple[int, ...] = (2048, 2048, 128),
    channels: int = 3,
    amp: bool = True,
    device: str = "cuda",
    run_dir: Path = Path("runs/bench_gpu"),
) -> Config:
    """One train phase of ``steps`` steps of SimCLR on ``backbone``, no test phase."""
    return validate_config(
        {
            "trainer": {"test_model": False, "log_frequency": 50},
            "data": {
                "name": DATASET_NAME,
                "image_size": image_size,
                "num_views": views,
                "batch_size": batch_size,
                "synthetic": {"train_size": steps * batch_size, "channels": channels},
            },
            "model": {
                "backbone": {"name": backbone, "in_channels": channels},
                "head": {"dims": list(head)},
                "amp": {"enabled": amp, "dtype": "bf16"},
            },
            "loss": {"name": "nt_xent", "temperature": 0.2},
            "optimizer": {"name": "sgd", "lr": 0.3, "num_epochs": 1, "warmup_epochs": 0},
            "meters": {"knn": {"enabled": False}},
            "checkpoint": {"dir": str(run_dir), "auto_resume": False, "phase_frequency": 0},
            "hooks": {"progress_bar": {"enabled": False}},
            "machine": {"device": device},
        },
        "bench_gpu config",
    )


class SyntheticBatches:
    """The same batch of random views, ``steps`` times, with the loader attributes the
    trainer reads (no sampler, no collate function)."""

    sampler = None
    collate_fn = None

    def __init__(self, cfg: Config, device: torch.device, channels_last: bool) -> None:
        data = cfg.data
        shape = (data.batch_size, cfg.model.backbone.in_channels, data.image_size, data.image_size)
        generator = torch.Generator(device=device).manual_seed(0)
        views = [
            torch.randn(shape, generator=generator, device=device) for _ in range(data.num_views)
        ]
        if channels_last:
            views = [view.contiguous(memory_format=torch.channels_last) for view in views]
        self.batch = {"views": views}
        self.batch_size = data.batch_size
        self.steps = data.synthetic.train_size // data.batch_size

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self.batch for _ in range(self.steps))


class Stopwatch:
    """Wall time between the end of step ``warmup`` and the end of the last step, with a
    CUDA synchronisation at both ends."""

    def __init__(self, device: torch.device, warmup: int, steps: int) -> None:
        self.device, self.warmup, self.steps = device, warmup, steps
        self.started = self.stopped = 0.0

    def after_step(self, done: int) -> None:
        if done in (self.warmup, self.steps):
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            if done == self.warmup:
                self.started = time.perf_counter()
            else:
                self.stopped = time.perf_counter()

    def images_per_second(self, batch_size: int) -> float:
        return batch_size * (self.steps - self.warmup) / (self.stopped - self.started)


def hand_loop(cfg: Config, warmup: int, channels_last: bool) -> float:
    """Images/s of the loop written by hand."""
    device = torch.device(cfg.machine.device)
    torch.manual_seed(cfg.trainer.seed)
    model = build_model(cfg).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    loss_fn = build_loss(cfg).to(device)
    optimizer = build_optimizer(cfg, model)
    batches = SyntheticBatches(cfg, device, channels_last)
    clock = Stopwatch(device, warmup, len(batches))
    dtype = torch.bfloat16 if cfg.model.amp.enabled else torch.float32
    model.train()
    for step, batch in enumerate(batches):
        with torch.autocast(device.type, dtype=dtype, enabled=cfg.model.amp.enabled):
            output = model(batch)
            loss = loss_fn(output, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        set_learning_rate(optimizer, learning_rate(cfg.optimizer, step, len(batches)))
        optimizer.step()
        clock.after_step(step + 1)
    return clock.images_per_second(batches.batch_size)


class SyntheticTask(Hook):
    """Feeds the trainer the synthetic batches (laid out channels-last when asked, as the
    hand loop's are) and times its steps."""

    priority = -1000

    def __init__(self, cfg: Config, warmup: int, channels_last: bool) -> None:
        super().__init__()
        self.cfg, self.warmup, self.channels_last = cfg, warmup, channels_last
        self.clock: Stopwatch | None = None

    def on_start(self, engine: Engine) -> None:
        state = engine.state
        batches = SyntheticBatches(self.cfg, state.device, self.channels_last)
        state.data_loaders["train"] = batches
        self.clock = Stopwatch(state.device, self.warmup, len(batches))

    def on_step(self, engine: Engine) -> None:
        assert self.clock is not None
        self.clock.after_step(engine.state.batches)


def hookbus(cfg: Config, warmup: int, channels_last: bool) -> float:
    """Images/s of ``SSLTrainer.train`` with the default hooks."""
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = cfg.model_copy(
            update={
                "checkpoint": cfg.checkpoint.model_copy(update={"dir": Path(run_dir)}),
                "model": cfg.model.model_copy(update={"channels_last": channels_last}),
            }
        )
        task = SyntheticTask(cfg, warmup, channels_last)
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), task]).train()
    assert task.clock is not None
    return task.clock.images_per_second(cfg.data.batch_size)


def main(argv: list[str] | None = None) -> None:
    quiet_training_log()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256, help="images per step")
    parser.add_argument("--steps", type=int, default=60, help="steps per run")
    parser.add_argument("--warmup", type=int, default=15, help="untimed first steps")
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs per contender")
    parser.add_argument("--channels-last", action="store_true", help="NHWC model and images")
    parser.add_argument("--quick", action="store_true", help="30 steps, 1 round")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit(
            "bench_gpu: no CUDA device here (torch.cuda.is_available() is False); run it "
            "on a machine with a GPU"
        )
    if args.quick:
        args.steps, args.warmup, args.rounds = 30, 10, 1
    torch.backends.cudnn.benchmark = True
    cfg = bench_config(steps=args.steps, batch_size=args.batch_size)

    def measured(run: Any) -> Any:
        def once() -> float:
            rate = run(cfg, args.warmup, args.channels_last)
            torch.cuda.empty_cache()
            return rate

        return once

    rates = interleaved(
        {"hand loop": measured(hand_loop), "hookbus": measured(hookbus)}, args.rounds
    )
    layout = "channels_last" if args.channels_last else "contiguous (NCHW)"
    print(
        f"bench_gpu: ResNet-50 SimCLR, batch {args.batch_size} x 2 views 224x224, bf16, "
        f"{layout}; {args.steps} steps ({args.warmup} untimed) x {args.rounds} rounds; "
        f"{machine()}"
    )
    rows = [[name, f"{median(values):.0f}"] for name, values in rates.items()]
    print(markdown_table(["contender", "images / s"], rows))
    ratio = median(rates["hookbus"]) / median(rates["hand loop"])
    print(f"\nhookbus / hand loop throughput: {ratio:.3f}")


if __name__ == "__main__":
    main()

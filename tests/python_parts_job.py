"""A run whose backbone, data sets and optimizer come from Python, for the kill-and-resume
test of objects from Python.

    python -m tests.python_parts_job RUN_DIR [--kill-at N]

Trains 4 epochs of 4 steps on generated images with a checkpoint after every train
iteration; with ``--kill-at N`` the process sends itself SIGKILL as train iteration
``N + 1`` starts (iteration N's checkpoint written), as a crash or an OOM kill would.
"""

from __future__ import annotations

import argparse
import os
import signal

import torch
from ignite.engine import Engine
from torch import nn
from torch.utils.data import Dataset

from hookbus import Config, Hook, SSLTrainer, default_hooks
from hookbus.config import validate_config

EPOCHS = 4


class Stripes(Dataset):
    """64 generated 3x12x12 uint8 images with 4 labels; item ``(image, label)``."""

    def __init__(self, count: int = 64) -> None:
        generator = torch.Generator().manual_seed(5)
        self.images = torch.randint(
            0, 256, (count, 3, 12, 12), dtype=torch.uint8, generator=generator
        )
        self.targets = [index % 4 for index in range(count)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.images[index], self.targets[index]


def user_backbone() -> nn.Module:
    """A small CNN built the way a user would, seeded so every process gets the same."""
    torch.manual_seed(3)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def sgd(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


class KillAt(Hook):
    """Sends SIGKILL to this process when train iteration ``at + 1`` starts.

    Fires on ``on_forward``; reads ``iteration``; writes nothing.
    """

    def __init__(self, at: int) -> None:
        super().__init__(name="kill_at")
        self.at = at

    def on_forward(self, engine: Engine) -> None:
        if engine.state.iteration == self.at + 1:
            os.kill(os.getpid(), signal.SIGKILL)


def config(run_dir: str) -> Config:
    return validate_config(
        {
            "data": {
                "pipeline": "batch",
                "image_size": 12,
                "batch_size": 16,
                "test_batch_size": 32,
            },
            "model": {"head": {"dims": [8, 16, 8]}},
            "optimizer": {"num_epochs": EPOCHS, "warmup_epochs": 0},
            "meters": {"knn": {"k": 3}},
            "checkpoint": {"dir": run_dir, "iter_frequency": 1},
            "hooks": {"progress_bar": {"enabled": False}, "summary_plot": {"enabled": False}},
        },
        "python parts job",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--kill-at", type=int, default=0)
    args = parser.parse_args()
    cfg = config(args.run_dir)
    hooks = default_hooks(cfg) + ([KillAt(args.kill_at)] if args.kill_at else [])
    trainer = SSLTrainer(cfg, hooks, backbone=user_backbone(), train_data=Stripes(), optimizer=sgd)
    trainer.train()


if __name__ == "__main__":
    main()

"""SimCLR on a torchvision ResNet-18 and a data set of your own, from Python.

    python -m hookbus.examples.torchvision_simclr

Nothing is registered by name: the backbone, the data set and the optimizer are Python
objects given to ``SSLTrainer``; the config says how to train them.
"""

from __future__ import annotations

import torch
import torchvision
from torch.utils.data import Dataset

from hookbus import Config, SSLTrainer


class Squares(Dataset):
    """Your data: 32x32 RGB images (uint8 tensors) of a square whose colour is the label."""

    COLOURS = torch.tensor([[220, 40, 40], [40, 200, 60], [50, 70, 230], [230, 210, 40]])

    def __init__(self, count: int = 512, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.labels = torch.arange(count) % len(self.COLOURS)
        self.images = torch.randint(0, 60, (count, 3, 32, 32), generator=generator).byte()
        corners = torch.randint(0, 20, (count, 2), generator=generator)
        for image, label, (y, x) in zip(self.images, self.labels, corners.tolist(), strict=True):
            image[:, y : y + 12, x : x + 12] = self.COLOURS[label].view(3, 1, 1).byte()

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.images[index], int(self.labels[index])


def train(run_dir: str = "runs/torchvision_simclr", epochs: int = 4, count: int = 512) -> dict:
    """Train and return the run's last phase results (``knn_top1`` among them)."""
    torch.manual_seed(0)  # the backbone's initial weights: the same in every run
    backbone = torchvision.models.resnet18()
    backbone.fc = torch.nn.Identity()  # features [batch, 512]
    cfg = Config.model_validate(
        {
            "data": {"pipeline": "torchvision", "image_size": 32, "batch_size": 64},
            "model": {"head": {"dims": [512, 256, 64]}},
            "loss": {"name": "nt_xent", "temperature": 0.5},
            "optimizer": {"num_epochs": epochs, "warmup_epochs": 1},
            "trainer": {"test_every_num_epochs": epochs},
            "checkpoint": {"dir": run_dir},
        }
    )
    trainer = SSLTrainer(
        cfg,
        backbone=backbone,
        train_data=Squares(count),
        test_data=Squares(count // 4, seed=1),
        optimizer=lambda model: torch.optim.AdamW(model.parameters(), lr=1e-3),
    )
    return trainer.train().history[-1]


if __name__ == "__main__":
    print(train())

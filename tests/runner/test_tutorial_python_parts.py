"""The objects-from-Python tutorial's example trains: a torchvision ResNet-18 and a user
data set, with SimCLR, nothing registered by name."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from hookbus.examples.torchvision_simclr import Squares, train


def test_the_example_trains_a_torchvision_model_on_a_user_data_set(tmp_path: Path) -> None:
    last = train(str(tmp_path / "run"), epochs=1, count=128)
    assert (last["phase"], last["iteration"]) == ("test", 2)
    assert last["knn_top1"] >= 0.5  # 0.656 measured (21 of 32); chance is 0.25
    recorded = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["from_python"]
    assert recorded["backbone"] == "torchvision.models.resnet.ResNet"
    assert (
        recorded["train_data"]
        == recorded["test_data"]
        == "hookbus.examples.torchvision_simclr.Squares"
    )
    assert recorded["optimizer"] == "hookbus.examples.torchvision_simclr.train.<locals>.<lambda>"


def test_the_example_data_set_gives_image_label_items() -> None:
    image, label = Squares(8)[5]
    assert (image.dtype, tuple(image.shape), label) == (torch.uint8, (3, 32, 32), 1)

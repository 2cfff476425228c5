"""``hookbus eval`` on two gloo ranks gives the numbers of one process: each rank encodes
its share of the images (101 test images: the shares differ by one), the shares are
gathered in the splits' order, and the scores are those of the same features."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hookbus.cli import main
from tests.eval_runs import SYNTHETIC, write_run
from tests.torchrun import torchrun

pytestmark = pytest.mark.slow

PARTS = ("knn", "linear", "low_shot", "retrieval", "train_images", "test_images", "classes")


def test_two_ranks_give_the_numbers_of_one_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_run(run_dir, SYNTHETIC)
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["eval", str(run_dir), "--out", str(one), "--batch-size", "50", "-q"]) == 0
    torchrun("-m", "hookbus", "eval", str(run_dir), "--out", str(two), "--batch-size", "32", "-q")
    alone = json.loads((one / "eval.json").read_text())
    ranks = json.loads((two / "eval.json").read_text())
    assert (alone["world_size"], ranks["world_size"]) == (1, 2)
    assert {part: ranks[part] for part in PARTS} == {part: alone[part] for part in PARTS}
    (first,), (second,) = (one / "eval_cache").iterdir(), (two / "eval_cache").iterdir()
    assert first.name == second.name  # the same encoder and images: the same cache key
    cached = [torch.load(path, weights_only=True) for path in (first, second)]
    for split in ("train", "test"):
        assert cached[0][split]["labels"].tolist() == cached[1][split]["labels"].tolist()
        torch.testing.assert_close(
            cached[0][split]["features"]["backbone"], cached[1][split]["features"]["backbone"]
        )

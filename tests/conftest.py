"""Shared fixtures: a tiny registered data set and a config that trains in a second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hookbus import Config
from hookbus.engine.config_io import validate_config
from tests.tiny_data import TINY


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread() -> Iterator[None]:
    """The suite's runs in this process use one torch thread. Its models are tiny, and on
    two shared cores a second thread waits for the first more than it helps: six of the
    trainer-heavy test files took 346-476 s on torch's default of two threads against
    82-89 s on one (load average 8.5). Tests of thread settings set their own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_config(run_dir: Path, **sections: dict) -> Config:
    """A config on the tiny data set: 3 train steps and 1 test step per epoch."""
    raw: dict = {
        "trainer": {"log_frequency": 1},
        "data": {"name": TINY, "image_size": 8, "batch_size": 8, "test_batch_size": 8},
        "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
        "optimizer": {"num_epochs": 2, "warmup_epochs": 0},
        "meters": {"knn": {"k": 3}},
        "checkpoint": {"dir": str(run_dir)},
        "hooks": {"progress_bar": {"enabled": False}},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return validate_config(raw, "tiny test config")


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path / "run")

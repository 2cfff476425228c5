"""Shared fixtures: one torch thread, and a config that trains in a second (``tiny_cfg``).

The tiny config and its data set are :mod:`hookbus.testing`'s, which users' tests import too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hookbus import Config
from hookbus.testing import tiny_config


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


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path / "run")

"""Shared fixtures: one torch thread, the process settings kept per test, and a config
that trains in a second (``tiny_cfg``).

The tiny config and its data set are :mod:`hookbus.testing`'s, which users' tests import too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from hookbus import Config
from hookbus.engine.process.machine import current_settings, restore_settings
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


@pytest.fixture(autouse=True)
def process_settings_kept() -> Iterator[None]:
    """Each test leaves the process settings (flush-denormal, threads, deterministic
    algorithms) as it found them. A test that sets a trainer up without training it
    keeps the run's settings in force (``machine.flush_denormal`` is on by default),
    and a later test in the same worker then meets a process that flushes subnormal
    floats to zero (hypothesis refuses to draw floats in one)."""
    settings = current_settings()
    yield
    restore_settings(settings)


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path / "run")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist's ``--dist loadgroup`` (``make test`` runs two workers), each
    test file runs on one worker, so a module fixture's training happens once, and the
    tests reading the shared two-rank launch of :mod:`tests.loss_reference` run on one
    worker, so ``torchrun`` starts once; the heaviest files go first
    (:mod:`tests.file_schedule`). Other ``--dist`` modes keep xdist's own scheduling."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.file_schedule import FileScheduling

    return FileScheduling(config, log)

from __future__ import annotations

import torch

from hookbus import FakeEngine
from hookbus.engine.bus.run_stats import (
    format_seconds,
    is_cuda,
    recent_batch_time,
)


def test_is_cuda_accepts_devices_and_names() -> None:
    assert is_cuda("cuda:1")
    assert is_cuda(torch.device("cuda"))
    assert not is_cuda("cpu")


def test_recent_batch_time_averages_the_last_steps() -> None:
    assert recent_batch_time(FakeEngine(batch_time=[9.0, 1.0, 2.0]).state, 2) == 1.5
    assert recent_batch_time(FakeEngine().state, 2) == 0.0


def test_format_seconds() -> None:
    assert format_seconds(3725.9) == "1:02:05"
    assert format_seconds(100 * 3600) == "100:00:00"
    assert format_seconds(-1.0) == "0:00:00"

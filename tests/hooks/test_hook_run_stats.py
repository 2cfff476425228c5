from __future__ import annotations

import torch

from hookbus import FakeEngine
from hookbus.hooks.run_stats import (
    format_seconds,
    is_cuda,
    phase_record,
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


def test_phase_record_has_the_phase_fields_and_metrics() -> None:
    state = FakeEngine(
        phase_idx=3,
        phase_name="test",
        train=False,
        train_phase_idx=1,
        iteration=12,
        batches=2,
        loss_sum=torch.tensor(3.0),
        metrics={"knn_top1": 0.5},
    ).state
    assert phase_record(state) == {
        "phase_idx": 3,
        "phase": "test",
        "train": False,
        "train_phase_idx": 1,
        "iteration": 12,
        "loss": 1.5,
        "knn_top1": 0.5,
    }

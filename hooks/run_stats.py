"""Read-only summaries of the run state shared by the reporting hooks (log, bar, files)."""

from __future__ import annotations

from typing import Any

import torch


def is_cuda(device: Any) -> bool:
    """True when ``device`` (a ``torch.device`` or its name) is a CUDA device."""
    return torch.device(device).type == "cuda"


def train_phase_count(state: Any) -> int:
    """Number of train phases in the phase plan ``state.phases``."""
    return sum(1 for phase in state.phases if phase.train)


def recent_batch_time(state: Any, steps: int) -> float:
    """Mean seconds per step over the last ``steps`` steps of the phase (0.0 before any)."""
    recent = state.batch_time[-steps:]
    return sum(recent) / len(recent) if recent else 0.0


def phase_mean_loss(state: Any) -> float | None:
    """Mean loss of the current phase, or None before its first step.

    Reads ``state.loss_sum`` on the host: a device sync, for phase ends only.
    """
    if state.batches == 0 or state.loss_sum is None:
        return None
    return float(state.loss_sum) / state.batches


def phase_record(state: Any) -> dict[str, Any]:
    """The phase's summary as ``metrics.json`` and the curves keep it: phase index and
    name, train flag, train phase index, iteration, mean loss, and every metric.

    Reads ``state.loss_sum`` on the host (see :func:`phase_mean_loss`): phase ends only.
    """
    return {
        "phase_idx": state.phase_idx,
        "phase": state.phase_name,
        "train": state.train,
        "train_phase_idx": state.train_phase_idx,
        "iteration": state.iteration,
        "loss": phase_mean_loss(state),
        **state.metrics,
    }


def format_seconds(seconds: float) -> str:
    """``seconds`` as ``h:mm:ss`` (hours unbounded), e.g. ``format_seconds(3725) == '1:02:05'``."""
    minutes, secs = divmod(max(int(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"

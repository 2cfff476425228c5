"""Read-only summaries of the run state shared by the reporting hooks (log, bar, files)."""

from __future__ import annotations

from typing import Any

import torch

from hookbus.engine.bus.state import RunState


def is_cuda(device: Any) -> bool:
    """True when ``device`` (a ``torch.device`` or its name) is a CUDA device."""
    return torch.device(device).type == "cuda"


def recent_batch_time(state: RunState, steps: int) -> float:
    """Mean seconds per step over the last ``steps`` steps of the phase (0.0 before any)."""
    recent = state.batch_time[-steps:]
    return sum(recent) / len(recent) if recent else 0.0


def phase_scalars(state: RunState) -> dict[str, float]:
    """The scalars the trackers record at a phase end: ``<phase>/loss_epoch`` (the mean
    loss, when the phase had a batch) and ``<phase>/<metric>`` for each meter value."""
    scalars: dict[str, float] = {}
    if state.phase_loss is not None:
        scalars[f"{state.phase_name}/loss_epoch"] = state.phase_loss
    for metric, value in state.metrics.items():
        scalars[f"{state.phase_name}/{metric}"] = value
    return scalars


def format_seconds(seconds: float) -> str:
    """``seconds`` as ``h:mm:ss`` (hours unbounded), e.g. ``format_seconds(3725) == '1:02:05'``."""
    minutes, secs = divmod(max(int(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_eta(seconds: float | None) -> str:
    """The time left as the log shows it: ``h:mm:ss``, or ``--`` while it is unknown
    (``state.eta_seconds`` is None until the timing hook has timed a step)."""
    return "--" if seconds is None else format_seconds(seconds)

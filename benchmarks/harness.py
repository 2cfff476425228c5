"""What the benchmark scripts share: interleaved rounds, medians, tables, the machine."""

from __future__ import annotations

import logging
import os
import platform
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import torch

T = TypeVar("T")


def interleaved(contenders: Mapping[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Measure every contender once per round, rotating the order from round to round.

    Each contender is a callable returning one measurement (seconds per iteration, say).
    Running them in alternation spreads the load changes of a shared machine over all
    of them alike, so ratios between them hold even when absolute figures drift.

    Example::

        times = interleaved({"a": run_a, "b": run_b}, rounds=5)
        print(median(times["b"]) / median(times["a"]))
    """
    names = list(contenders)
    results: dict[str, list[T]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(contenders[name]())
    return results


def median(values: Sequence[float]) -> float:
    """The median of ``values``."""
    return statistics.median(values)


def paired_median(values: Sequence[float], baseline: Sequence[float]) -> float:
    """The median over rounds of ``value - baseline``, both measured in the same round."""
    return statistics.median(v - b for v, b in zip(values, baseline, strict=True))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``rows`` under ``header`` as a Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line naming where the figures come from."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {gpu}, load average "
        + " ".join(f"{load:.1f}" for load in os.getloadavg())
    )


def quiet_training_log() -> None:
    """Keep hookbus's progress lines off the console while a benchmark trains in this
    process (a handler on the ``hookbus`` logger counts as logging configured)."""
    logging.getLogger("hookbus").addHandler(logging.NullHandler())

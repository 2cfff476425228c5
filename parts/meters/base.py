"""The meter base class: per-phase sums kept as tensors and summed across ranks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn import Module
from torch.types import Device

from hookbus.engine.process import distributed


class Meter(ABC):
    """Accumulates a metric over a phase from the model outputs of each step.

    A meter's state is a few sums (``count_names``), kept in ``counts`` as 0-dim
    float64 tensors on the device of the updates, so that :meth:`update` never waits
    for the device. :meth:`sync_state` sums them over ranks; :meth:`value` turns them
    into floats. Subclasses set ``name``, ``count_names`` and ``phases`` (the phase
    kinds, ``"train"`` and/or ``"test"``, in which the trainer updates them) and
    implement :meth:`update` and :meth:`value`.
    """

    name: str = ""
    count_names: tuple[str, ...] = ()
    value_names: tuple[str, ...] = ()
    """The keys :meth:`value` may return: an ignite metric attached under one of them is
    recorded as ``ignite/<name>`` instead of replacing the meter's value."""
    phases: tuple[str, ...] = ("train", "test")

    def __init__(self) -> None:
        self.counts: dict[str, Tensor] = {}
        self.reset()

    def reset(self) -> None:
        """Set every count to zero, for a new phase."""
        self.counts = {name: torch.zeros((), dtype=torch.float64) for name in self.count_names}

    def add(self, name: str, amount: Tensor) -> None:
        """Add ``amount`` to count ``name``, on ``amount``'s device, without a host sync."""
        self.counts[name] = self.counts[name] + amount

    def prepare(  # noqa: B027 - an optional step, empty unless a meter needs it
        self, model: Module, data_loaders: dict[str, Iterable], device: Device
    ) -> None:
        """Called by the trainer at the start of each phase the meter is active in.

        The model is already in that phase's mode (eval in test phases); a meter that
        needs data beyond the steps' outputs (a memory bank) computes it here.
        """

    @abstractmethod
    def update(self, output: dict, batch: dict) -> None:
        """Accumulate one step: the model's ``output`` for ``batch``."""

    @abstractmethod
    def value(self) -> dict[str, float]:
        """The metric values of the counts, e.g. ``{"knn_top1": 0.97}``."""

    def sync_state(self) -> None:
        """Replace the counts by their sums over all ranks (a no-op in one process).

        Call it once per phase, on every rank, after the last update.
        """
        if not distributed.is_distributed() or not self.count_names:
            return
        if dist.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        else:
            device = torch.device("cpu")
        stacked = torch.stack([self.counts[name].to(device) for name in self.count_names])
        dist.all_reduce(stacked)
        self.counts = dict(zip(self.count_names, stacked.unbind(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        """The counts, on the CPU, for a checkpoint taken inside a phase."""
        return {
            "counts": {name: count.detach().cpu().clone() for name, count in self.counts.items()}
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore counts saved by :meth:`state_dict`."""
        saved = state["counts"]
        missing = set(self.count_names) - set(saved)
        if missing:
            raise KeyError(f"meter {self.name!r}: saved state lacks counts {sorted(missing)}")
        self.counts = {name: saved[name].to(torch.float64).clone() for name in self.count_names}

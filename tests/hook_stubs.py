"""Stand-ins shared by the hook tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    """What hooks read of ``hookbus.engine.bus.phases.Phase``: the kind and the length in steps."""

    train: bool
    length: int

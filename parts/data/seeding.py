"""Derive independent random seeds from tuples of integers (run seed, epoch, ...)."""

from __future__ import annotations

import numpy as np


def mix_seed(*values: int) -> int:
    """A 64-bit seed determined by ``values`` (non-negative integers), in order.

    Built with numpy's ``SeedSequence``, so nearby tuples such as ``(0, 1)`` and
    ``(1, 0)`` give unrelated seeds, unlike ``seed + epoch``.
    """
    return int(np.random.SeedSequence(list(values)).generate_state(1, dtype=np.uint64)[0])

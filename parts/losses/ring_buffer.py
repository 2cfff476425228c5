"""RingBuffer: the last rows written, in fixed storage; the queues of the method hooks."""

from __future__ import annotations

from typing import Any

import torch


class RingBuffer:
    """A first-in first-out buffer of the last ``size`` rows written to it, along ``dim``.

    The storage is allocated at the first :meth:`write` (the rows' shape with ``size``
    along ``dim``, zeros) and written in place of the oldest rows at a position that wraps
    around: ``position`` is the next slot written, ``filled`` the slots written so far (at
    most ``size``). Each write makes a new storage tensor, so a view taken before it (the
    queue a loss read for its backward pass) stays as it was. It serves MoCo's key queue,
    NNCLR's support set and SwAV's queue; it is no hook, and holds no state of the run.
    """

    def __init__(self, size: int, *, dim: int = 0) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.dim = dim
        self.rows: torch.Tensor | None = None
        self.position = 0
        self.filled = 0

    def write(self, rows: torch.Tensor) -> None:
        """Add ``rows`` (``n`` along ``dim``); beyond ``size`` rows, the oldest are overwritten."""
        count = rows.shape[self.dim]
        if count > self.size:
            rows = rows.narrow(self.dim, count - self.size, self.size)
            count = self.size
        if self.rows is None:
            shape = list(rows.shape)
            shape[self.dim] = self.size
            self.rows = rows.new_zeros(shape)
        slots = (self.position + torch.arange(count, device=rows.device)) % self.size
        self.rows = self.rows.index_copy(self.dim, slots, rows.to(self.rows.dtype))
        self.position = (self.position + count) % self.size
        self.filled = min(self.size, self.filled + count)

    def in_use(self) -> torch.Tensor | None:
        """The slots written so far, in slot order (all of them once the buffer is full);
        None before the first write."""
        if self.rows is None:
            return None
        return self.rows.narrow(self.dim, 0, self.filled)

    def newest_first(self) -> torch.Tensor | None:
        """All ``size`` slots, the last written first; None before the first write."""
        if self.rows is None:
            return None
        age = torch.arange(self.size, device=self.rows.device)
        return self.rows.index_select(self.dim, (self.position - 1 - age) % self.size)

    def to(self, device: torch.device | str) -> None:
        """Move the storage (a loaded checkpoint's, say) to ``device``."""
        if self.rows is not None:
            self.rows = self.rows.to(device)

    def state(self, rows_key: str) -> dict[str, Any]:
        """``{rows_key: storage (an empty tensor before the first write), "position",
        "filled"}``: the state dict of the hook that holds the buffer."""
        rows = torch.empty(0) if self.rows is None else self.rows
        return {rows_key: rows, "position": self.position, "filled": self.filled}

    def load(self, state: dict[str, Any], rows_key: str) -> None:
        """Restore what :meth:`state` returned."""
        self.rows = state[rows_key] if state["filled"] else None
        self.position = state["position"]
        self.filled = state["filled"]

    def load_newest_first(self, rows: torch.Tensor, filled: int) -> None:
        """Take ``rows`` laid out as :meth:`newest_first` gives them (``size`` slots along
        ``dim``, the newest first, the ``size - filled`` oldest unused)."""
        if not filled:
            self.rows, self.position, self.filled = None, 0, 0
            return
        # Slot size - 1 - k holds the k-th newest, and the next write goes to slot 0, the
        # oldest: the same buffer with its position at 0.
        self.rows = rows.flip(self.dim)
        self.position = 0
        self.filled = filled

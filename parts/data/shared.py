"""Values the training process sets and DataLoader worker processes read, while they run."""

from __future__ import annotations

from typing import Any, overload

import torch


class SharedInt:
    """A class attribute whose value, per instance, is an int in shared memory.

    DataLoader workers get a copy of the collate function when they start; a persistent
    worker keeps it for the whole run. An attribute declared ``epoch = SharedInt()`` on
    the collate class lives in a shared-memory tensor instead, so ``collate.epoch = 3``
    in the training process is what every worker reads from then on (forked or spawned
    workers alike: torch passes shared tensors to them by handle).

    Example::

        class Collate:
            epoch = SharedInt()

            def __init__(self) -> None:
                self.epoch = 0
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_shared_{name}"

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> SharedInt: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> int: ...

    def __get__(self, instance: Any, owner: type | None = None) -> SharedInt | int:
        if instance is None:
            return self
        return int(instance.__dict__[self._slot])

    def __set__(self, instance: Any, value: int) -> None:
        cell = instance.__dict__.get(self._slot)
        if cell is None:
            instance.__dict__[self._slot] = torch.tensor(value, dtype=torch.int64).share_memory_()
        else:
            cell.fill_(value)

"""The runs' DataLoader: without worker processes, batches are made on one torch thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from hookbus.engine.threads import one_torch_thread


class SSLDataLoader(DataLoader):
    """A ``DataLoader`` that makes its batches on one torch thread when it has no workers.

    Worker processes run torch on one thread each. Without workers the batches are made
    in the training process, whose thread pool is sized for the model's large
    operations; the augmentations' many small operations gain nothing from it, and on a
    busy machine each parallel operation waits until every pool thread is scheduled (the
    digits augmentations ran about 60 times slower on two threads than on one, on a
    loaded 2-core machine). So each batch is made with one thread, and the training
    process's setting is restored before the step.
    """

    def __iter__(self) -> Iterator[Any]:
        batches = super().__iter__()
        return batches if self.num_workers else _OneThread(batches)


class _OneThread:
    """An iterator of batches that sets torch to one thread while it makes each."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches

    def __iter__(self) -> _OneThread:
        return self

    def __next__(self) -> Any:
        with one_torch_thread():
            return next(self._batches)

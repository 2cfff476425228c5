"""The runs' DataLoader: without worker processes, batches are made on one torch thread;
with them, a user error a worker raises reaches the user as it would without workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from hookbus.engine.errors import InputChangedError, UserError
from hookbus.engine.process.threads import one_torch_thread


class SSLDataLoader(DataLoader):
    """A ``DataLoader`` that makes its batches on one torch thread when it has no workers.

    Worker processes run torch on one thread each. Without workers the batches are made
    in the training process, whose thread pool is sized for the model's large
    operations; the augmentations' many small operations gain nothing from it, and on a
    busy machine each parallel operation waits until every pool thread is scheduled (the
    digits augmentations ran about 60 times slower on two threads than on one, on a
    loaded 2-core machine). So each batch is made with one thread, and the training
    process's setting is restored before the step.

    With workers, an error a worker raises reaches this process as torch rebuilds it:
    the same type, its message the worker's whole traceback. For a user error (a
    :class:`~hookbus.engine.errors.DataError` naming an image Pillow cannot read) that
    would be a page where a line belongs, so :class:`_WorkerUserErrors` raises it again
    with the worker's own message: the line the user sees without workers (and so for
    :class:`~hookbus.engine.errors.InputChangedError`, a shard changed under the run).
    """

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # wraps torch's iterator
        batches = super().__iter__()
        return _WorkerUserErrors(batches) if self.num_workers else _OneThread(batches)


class _OneThread:
    """An iterator of batches that sets torch to one thread while it makes each."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches

    def __iter__(self) -> _OneThread:
        return self

    def __next__(self) -> Any:
        with one_torch_thread():
            return next(self._batches)


class _WorkerUserErrors:
    """An iterator of batches made by workers that raises a user error of a worker with
    the worker's message. Everything else (``_shutdown_workers``, ``len``) is the
    wrapped iterator's."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches

    def __iter__(self) -> _WorkerUserErrors:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._batches)
        except (UserError, InputChangedError) as exc:
            # The workers are stopped now, while their queues are open: left to the
            # garbage collector, torch's iterator is finalised after its queues and waits
            # its whole join timeout (5 s) for each worker before the error is seen.
            shutdown = getattr(self._batches, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            message = worker_message(exc)
            if message is None:
                raise
            raise type(exc)(message) from None

    def __len__(self) -> int:
        return len(self._batches)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batches, name)


def worker_message(exc: BaseException) -> str | None:
    """The message a loader worker's exception had in the worker, from the text torch
    gives the copy it raises in this process ("Caught DataError in DataLoader worker
    process 0. Original Traceback ... hookbus.engine.errors.DataError: <message>");
    None when ``exc`` is not such a copy."""
    text = str(exc.args[0]) if len(exc.args) == 1 else ""
    kind = type(exc)
    if not text.startswith(f"Caught {kind.__name__} in DataLoader worker process "):
        return None
    header = f"\n{kind.__module__}.{kind.__qualname__}: "
    start = text.rfind(header)
    return text[start + len(header) :].strip() if start >= 0 else None

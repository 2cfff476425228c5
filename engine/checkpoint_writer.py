"""Asynchronous checkpoint writes: snapshot to host memory now, write in the background.

Training waits only for the snapshot (a copy of every tensor into CPU memory); the
serialisation, checksum, fsync and rename run on a background thread. One write is in
flight at a time: a new request first waits for the previous write to finish. An error
raised by the write is kept and raised in the training thread by the next request, by
:meth:`CheckpointWriter.raise_if_failed` or by :meth:`CheckpointWriter.wait`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


def snapshot_to_host(obj: T) -> T:
    """A copy of ``obj`` that later training steps cannot change.

    Tensors are detached and copied into CPU memory (CUDA tensors into pinned memory,
    asynchronously, with one synchronisation per device at the end); a tensor that
    appears twice is copied once. Dicts (their type kept), lists and tuples (named
    tuples too) are rebuilt around the copies; any other value is deep-copied.
    """
    memo: dict[int, torch.Tensor] = {}
    devices: set[torch.device] = set()
    copied = _snapshot(obj, memo, devices)
    for device in devices:
        torch.cuda.synchronize(device)
    return copied


def _snapshot(obj: Any, memo: dict[int, torch.Tensor], devices: set[torch.device]) -> Any:
    if isinstance(obj, torch.Tensor):
        if id(obj) not in memo:
            memo[id(obj)] = _tensor_to_host(obj.detach(), devices)
        return memo[id(obj)]
    if isinstance(obj, dict):
        copied = copy.copy(obj)
        for key, value in obj.items():
            copied[key] = _snapshot(value, memo, devices)
        return copied
    if isinstance(obj, list):
        return [_snapshot(value, memo, devices) for value in obj]
    if isinstance(obj, tuple):
        items = [_snapshot(value, memo, devices) for value in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return copy.deepcopy(obj)


def _tensor_to_host(tensor: torch.Tensor, devices: set[torch.device]) -> torch.Tensor:
    if tensor.is_cuda and tensor.layout == torch.strided:
        host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        host.copy_(tensor, non_blocking=True)
        devices.add(tensor.device)
        return host
    if tensor.device.type == "cpu":
        return tensor.clone()
    return tensor.to("cpu", copy=True)


class CheckpointWriter:
    """Writes checkpoints on a background thread, one at a time.

    :meth:`submit` waits for the write in flight (raising its error, if it failed),
    snapshots the checkpoint with :func:`snapshot_to_host`, and hands the snapshot to
    ``write`` on a new thread; it returns as soon as the thread has started. The thread
    is not a daemon: a process that ends normally finishes the write first.

    Example::

        writer = CheckpointWriter()
        writer.submit(lambda snapshot: save_atomic(snapshot, path), checkpoint)
        ...  # train on; the model may change, the snapshot does not
        writer.wait()  # the file is on disk, or the write's error is raised here
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """True while a write is in flight."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, write: Callable[[T], object], checkpoint: T) -> None:
        """Snapshot ``checkpoint`` and run ``write(snapshot)`` in the background."""
        self.wait()
        snapshot = snapshot_to_host(checkpoint)
        self._thread = threading.Thread(
            target=self._run, args=(write, snapshot), name="hookbus-checkpoint-writer"
        )
        self._thread.start()

    def wait(self) -> None:
        """Block until the write in flight is done; raise its error, if it failed."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self.raise_if_failed()

    def raise_if_failed(self) -> None:
        """Raise the error of a write that has failed, without waiting for one in flight."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self, write: Callable[[Any], object], snapshot: Any) -> None:
        try:
            write(snapshot)
        except BaseException as error:  # handed to the training thread
            self._error = error

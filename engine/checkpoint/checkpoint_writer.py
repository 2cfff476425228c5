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
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

from hookbus.engine.process.threads import one_torch_thread

T = TypeVar("T")

BufferKey = tuple[torch.Size, torch.dtype, bool]
"""(shape, dtype, pinned) of a host buffer."""


class HostBuffers:
    """Host tensors kept from one snapshot for the next one to copy into.

    Copying into memory that was written before is several times faster than into fresh
    memory (every new page faults on first touch), and pinned memory is slow to allocate;
    a run's checkpoints have the same tensors each time, so after the first snapshot the
    copies reuse the previous snapshot's memory. Costs one host copy of the state.
    """

    def __init__(self) -> None:
        self._free: dict[BufferKey, list[torch.Tensor]] = {}

    def take(self, like: torch.Tensor) -> tuple[BufferKey, torch.Tensor]:
        """A contiguous host tensor shaped like ``like`` (pinned when it is on CUDA)."""
        key = (like.shape, like.dtype, like.is_cuda)
        free = self._free.get(key)
        if free:
            return key, free.pop()
        return key, torch.empty(like.shape, dtype=like.dtype, pin_memory=like.is_cuda)

    def give_back(self, buffers: Iterable[tuple[BufferKey, torch.Tensor]]) -> None:
        """Make ``buffers`` (from :meth:`take`) available to the next snapshot."""
        for key, buffer in buffers:
            self._free.setdefault(key, []).append(buffer)


class _Snapshot:
    """One snapshot in progress: what was copied, from which devices, into which buffers."""

    def __init__(self, buffers: HostBuffers | None) -> None:
        self.buffers = buffers if buffers is not None else HostBuffers()
        self.taken: list[tuple[BufferKey, torch.Tensor]] = []
        self.devices: set[torch.device] = set()
        self._memo: dict[int, torch.Tensor] = {}

    def _copy(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            if id(obj) not in self._memo:
                self._memo[id(obj)] = self._tensor(obj.detach())
            return self._memo[id(obj)]
        if isinstance(obj, dict):
            copied = copy.copy(obj)
            for key, value in obj.items():
                copied[key] = self._copy(value)
            return copied
        if isinstance(obj, list):
            return [self._copy(value) for value in obj]
        if isinstance(obj, tuple):
            items = [self._copy(value) for value in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        return copy.deepcopy(obj)

    def _tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        plain = tensor.layout == torch.strided and not tensor.is_quantized
        if not plain or tensor.device.type not in ("cpu", "cuda"):
            return tensor.to("cpu", copy=True)
        key, host = self.buffers.take(tensor)
        host.copy_(tensor, non_blocking=tensor.is_cuda)
        if tensor.is_cuda:
            self.devices.add(tensor.device)
        self.taken.append((key, host))
        return host

    def copy(self, obj: Any) -> Any:
        """The copy of ``obj``, complete. The copies are memory-bound: they run on one
        torch thread (see :func:`hookbus.engine.process.threads.one_torch_thread`)."""
        with one_torch_thread():
            copied = self._copy(obj)
        for device in self.devices:
            torch.cuda.synchronize(device)
        return copied


def snapshot_to_host(obj: T, buffers: HostBuffers | None = None) -> T:
    """A copy of ``obj`` that later training steps cannot change.

    Tensors are detached and copied into CPU memory (CUDA tensors into pinned memory,
    asynchronously, with one synchronisation per device at the end), into ``buffers``
    when given; a tensor that appears twice is copied once. Dicts (their type kept),
    lists and tuples (named tuples too) are rebuilt around the copies; any other value
    is deep-copied.
    """
    return _Snapshot(buffers).copy(obj)


class CheckpointWriter:
    """Writes checkpoints on a background thread, one at a time.

    :meth:`submit` waits for the write in flight (raising its error, if it failed),
    snapshots the checkpoint to host memory (reusing the previous snapshot's buffers,
    see :class:`HostBuffers`), and hands the snapshot to ``write`` on a new thread; it
    returns as soon as the thread has started. The thread is not a daemon: a process
    that ends normally finishes the write first.

    Example::

        writer = CheckpointWriter()
        writer.submit(lambda snapshot: save_atomic(snapshot, path), checkpoint)
        ...  # train on; the model may change, the snapshot does not
        writer.wait()  # the file is on disk, or the write's error is raised here
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._buffers = HostBuffers()
        self._in_flight: list[tuple[BufferKey, torch.Tensor]] = []

    @property
    def busy(self) -> bool:
        """True while a write is in flight."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, write: Callable[[T], object], checkpoint: T) -> None:
        """Snapshot ``checkpoint`` and run ``write(snapshot)`` in the background."""
        self.wait()
        snapshot = _Snapshot(self._buffers)
        copied = snapshot.copy(checkpoint)
        self._in_flight = snapshot.taken
        self._thread = threading.Thread(
            target=self._run, args=(write, copied), name="hookbus-checkpoint-writer"
        )
        self._thread.start()

    def wait(self) -> None:
        """Block until the write in flight is done; raise its error, if it failed."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
            self._buffers.give_back(self._in_flight)
            self._in_flight = []
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

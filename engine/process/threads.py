"""Running a stretch of small or memory-bound torch work on one intra-op thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the body with torch set to one intra-op thread, then restore the setting.

    For work that gains nothing from the thread pool (many small operations, memory
    copies): on a busy machine every parallel operation waits until each pool thread is
    scheduled, which can make such work tens of times slower than on one thread.

    Example::

        with one_torch_thread():
            batch = next(batches)
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)

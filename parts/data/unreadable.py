"""Images that cannot be read, skipped when ``data.folder.skip_unreadable`` is on.

One truncated JPEG among 100,000 photos need not stop a run. With the option on, an
image that fails to decode (truncated, garbled, not an image, gone) is skipped where its
batch is made (in the loader's worker): its place in the batch is taken by the next
readable image of the same batch (its pixels and label; the row keeps its own index, so
the random views of every other row are unchanged), and the batch carries the one-line
reason under :data:`UNREADABLE_KEY`. The run counts them, lists them in its run
directory and stops past a bound
(:class:`~hookbus.hooks.unreadable_images.UnreadableImagesHook`).

A batch with no readable image at all cannot be made: that is the decoder's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from hookbus.engine.errors import DataError

UNREADABLE_KEY = "unreadable"
"""The batch key of the lines naming the images skipped in it (absent when none was)."""


class Unreadable(NamedTuple):
    """An image that could not be read, in place of its pixels: the line saying why."""

    message: str


def stand_ins(reasons: Sequence[str | None]) -> list[int]:
    """For each row of a batch, the row whose image it takes: itself when readable
    (``reasons[row]`` None), else the next readable row after it, cyclically.
    :class:`DataError` with the first reason when no row is readable."""
    readable = [row for row, reason in enumerate(reasons) if reason is None]
    if not readable:
        first = next(reason for reason in reasons if reason is not None)
        raise DataError(f"{first} (and no image of its batch could be read in its place)")
    return [
        row if reason is None else next((r for r in readable if r > row), readable[0])
        for row, reason in enumerate(reasons)
    ]

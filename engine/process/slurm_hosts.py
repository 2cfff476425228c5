"""SLURM's compact host lists and task counts, read in Python (no ``scontrol`` call).

A node list such as ``node[01-03,07],gpu5`` names node01, node02, node03, node07 and
gpu5: items separated by commas outside brackets, each a name with bracketed ranges
(a range keeps the zero padding of its first number). A task count per node such as
``2(x3),1`` says 2 tasks on each of the first three nodes and 1 on the fourth.

Both raise :class:`ValueError` with what is wrong; the caller names the variable.
Torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_NAME = re.compile(r"^[A-Za-z0-9._-]*\Z")
_RANGE = re.compile(r"^(\d{1,9})(?:-(\d{1,9}))?\Z")
_COUNT = re.compile(r"^(\d{1,6})(?:\(x(\d{1,6})\))?\Z")
MAX_TEXT = 65536
"""Longest node list or task count read (SLURM's own lists are far shorter)."""
MAX_RANGES = 8
"""Most bracketed ranges in one item of a node list."""


def _items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets; brackets must pair, unnested."""
    if not text or len(text) > MAX_TEXT:
        raise ValueError("is empty" if not text else f"is longer than {MAX_TEXT} characters")
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
        if depth not in (0, 1):
            raise ValueError(f"has an unmatched or nested bracket at character {index + 1}")
    if depth:
        raise ValueError("has an unclosed '['")
    items.append(text[start:])
    return items


def _numbers(ranges: str) -> list[tuple[int, int, int]]:
    """``01-03,7`` as ``[(1, 3, 2), (7, 7, 1)]``: first, last, digits to pad to."""
    parsed = []
    for part in ranges.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise ValueError(f"has a range {part!r} that is not N or N-M")
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) < int(first):
            raise ValueError(f"has a range {part!r} that counts down")
        parsed.append((int(first), int(last), len(first)))
    return parsed


Piece = str | list[tuple[int, int, int]]


def _pieces(item: str) -> list[Piece]:
    """One item of a node list checked and split: names, and the ranges between them."""
    pieces: list[Piece] = []
    for index, piece in enumerate(re.split(r"\[([^\]]*)\]", item)):
        if index % 2:
            pieces.append(_numbers(piece))
        elif _NAME.match(piece):
            pieces.append(piece)
        else:
            raise ValueError(f"has a host name {item!r} with characters outside A-Z a-z 0-9 . _ -")
    if not item:
        raise ValueError("has an empty host name")
    if len(pieces) > 2 * MAX_RANGES + 1:
        raise ValueError(f"has a host name {item[:40]!r} with more than {MAX_RANGES} ranges")
    return pieces


def _expand(pieces: list[Piece]) -> Iterator[str]:
    """The host names of one checked item, lazily (``node[01-02]-ib``: node01-ib, ...)."""
    if not pieces:
        yield ""
        return
    head, rest = pieces[0], pieces[1:]
    starts = (
        [head]
        if isinstance(head, str)
        else (
            str(number).zfill(width)
            for first, last, width in head
            for number in range(first, last + 1)
        )
    )
    for start in starts:
        for tail in _expand(rest):
            yield start + tail


def expand_hostlist(text: str, *, limit: int = 1 << 16) -> list[str]:
    """Every host of a SLURM node list, in order (at most ``limit`` of them).

    Example::

        expand_hostlist("node[01-03,07],gpu5")
        # ['node01', 'node02', 'node03', 'node07', 'gpu5']
    """
    hosts = []
    for item in _items(text):
        for host in _expand(_pieces(item)):
            hosts.append(host)
            if len(hosts) > limit:
                raise ValueError(f"names more than {limit} hosts")
    return hosts


def first_host(text: str) -> str:
    """The first host of a SLURM node list, where task 0 of a step runs; the whole list
    is checked, but only the first host is spelled out."""
    items = [_pieces(item) for item in _items(text)]
    return next(_expand(items[0]))


def tasks_per_node(text: str) -> list[int]:
    """SLURM's tasks per node (``SLURM_STEP_TASKS_PER_NODE``) as one count per node.

    Example::

        tasks_per_node("2(x3),1")  # [2, 2, 2, 1]
    """
    counts: list[int] = []
    for part in _items(text):
        match = _COUNT.match(part)
        if match is None:
            raise ValueError(f"has {part!r}, not N or N(xM)")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts

"""The console: the ``hookbus`` logger's lines on standard output.

The command line always shows them (warnings only with ``-q``); ``SSLTrainer.train()``
called from Python shows them too, unless the caller has configured logging itself (a
handler on the ``hookbus`` logger or on the root logger), in which case their set-up
decides.

Standard output is written like any file of a run: a full device (``> /dev/full``) is a
:class:`~hookbus.engine.errors.WriteFailure` naming it (one line, exit status 1), and a
closed pipe (``| head``) a ``BrokenPipeError`` that the command line ends quietly
(:func:`guarded_stdout`).
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tqdm import tqdm

from hookbus.engine.errors import LineHandler, WriteFailure, writing

logger = logging.getLogger("hookbus")

CONSOLE_HANDLER = "hookbus-console"
"""The name of the handler this module adds, so that it is added once."""
STDOUT = "standard output"


class GuardedStream:
    """A text stream whose failed write or flush raises a WriteFailure naming standard
    output (a closed pipe: ``BrokenPipeError``) and is remembered in :attr:`failed`;
    everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        return self._guarded(self.stream.write, text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def _guarded(self, method: Any, *args: Any) -> Any:
        try:
            with writing(STDOUT):
                return method(*args)
        except (OSError, WriteFailure):
            self.failed = True
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def guarded_stdout() -> Iterator[GuardedStream]:
    """Inside the block, ``sys.stdout`` is a :class:`GuardedStream`. At its end the
    stream is flushed, so that a failure is seen while it can still be reported; or,
    once it failed, its descriptor is pointed at ``/dev/null``, so that the
    interpreter's last flush at exit neither fails nor prints "Exception ignored"."""
    guard = GuardedStream(sys.stdout)
    sys.stdout = guard
    try:
        yield guard
    finally:
        try:
            if not guard.failed:
                guard.flush()
        finally:
            sys.stdout = guard.stream
            if guard.failed:
                _silence(guard.stream)


def _silence(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return  # not a file (a test's StringIO): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class ConsoleHandler(LineHandler):
    """The console's handler: each line is written with the progress bars on the
    terminal cleared, and they are redrawn below it, so that a line and a bar never
    share a line of the screen (a line printed over a bar would be glued to its end)."""

    def emit(self, record: logging.LogRecord) -> None:
        with tqdm.external_write_mode(file=self.stream):
            super().emit(record)


def _handler(level: int) -> logging.Handler:
    handler = ConsoleHandler(sys.stdout, STDOUT)
    handler.set_name(CONSOLE_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    return handler


@contextmanager
def console(quiet: bool) -> Iterator[None]:
    """The command line's logging inside the block: the ``hookbus`` logger to standard
    output, INFO (or WARNING when ``quiet``), not passed on to the root logger. After the
    block the logger is as it was, so that ``main()`` called in a process (a test, a
    notebook) leaves no handler on a stream that may be closed by then."""
    saved = (list(logger.handlers), logger.level, logger.propagate)
    for old in [h for h in logger.handlers if h.get_name() == CONSOLE_HANDLER]:
        logger.removeHandler(old)
    logger.addHandler(_handler(logging.WARNING if quiet else logging.INFO))
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def logging_configured() -> bool:
    """Whether anyone set up where the ``hookbus`` logger's lines go."""
    return bool(logger.handlers) or bool(logging.getLogger().handlers)


@contextmanager
def console_unless_configured() -> Iterator[None]:
    """Show the ``hookbus`` logger's INFO lines on standard output inside the block,
    unless logging is configured already; put everything back after."""
    if logging_configured():
        yield
        return
    handler = _handler(logging.INFO)
    saved_level = logger.level
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved_level)

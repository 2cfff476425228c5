"""The console: the ``hookbus`` logger's lines on standard output.

The command line always shows them (warnings only with ``-q``); ``SSLTrainer.train()``
called from Python shows them too, unless the caller has configured logging itself (a
handler on the ``hookbus`` logger or on the root logger), in which case their set-up
decides.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("hookbus")

CONSOLE_HANDLER = "hookbus-console"
"""The name of the handler this module adds, so that it is added once."""


def _handler(level: int) -> logging.Handler:
    handler = logging.StreamHandler(sys.stdout)
    handler.set_name(CONSOLE_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    return handler


def setup_console(quiet: bool) -> None:
    """The command line's logging: the ``hookbus`` logger to standard output, INFO (or
    WARNING when ``quiet``), not passed on to the root logger."""
    for old in [h for h in logger.handlers if h.get_name() == CONSOLE_HANDLER]:
        logger.removeHandler(old)
    logger.addHandler(_handler(logging.WARNING if quiet else logging.INFO))
    logger.setLevel(logging.INFO)
    logger.propagate = False


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

"""The errors the ``hookbus`` command turns into one line and an exit status: a user's
mistake (2), a write or a collective that failed or an input that changed under the run
(1), a preempted run (75).

A write site says what it writes with :func:`writing` (or logs through a
:class:`LineHandler`): an ``OSError`` there (a full disk, a read-only place, a
permission) becomes a :class:`WriteFailure` naming the file, which the command line
prints as one line with exit status 1. A closed pipe on standard output is the command
line's to end quietly, so a ``BrokenPipeError`` passes through as itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class UserError(Exception):
    """A problem in the user's input (a config, an override, a path): not a hookbus bug."""


class ConfigError(UserError, ValueError):
    """A config that cannot be read or does not validate; the message names where."""


class DataError(UserError):
    """Data that cannot be read (a missing folder, an unreadable image); the message names it."""


class CheckpointError(UserError):
    """A checkpoint that cannot be read or does not fit this run; the message names it."""


class WriteFailure(RuntimeError):
    """A file hookbus writes could not be written (a full disk, a read-only place); the
    message names the file. Checkpoints already written stay intact: once the cause is
    fixed, the same command resumes."""


class CheckpointWriteError(WriteFailure):
    """A checkpoint could not be written (a full disk, say); the previous one is intact."""


class OutputWriteError(WriteFailure):
    """A command's output file (an export, a plot) could not be written (a full disk, a
    read-only folder); nothing half-written is left. Exit status 1."""


class InputChangedError(RuntimeError):
    """An input that passed its checks changed under the run (a shard replaced, shrunk
    or rewritten after it was checked): the machine's state, not the user's input, so
    exit status 1. The checkpoints written so far are intact; the message names the file
    and the place in it."""


class CollectiveFailure(RuntimeError):
    """A collective across ranks failed because another rank died or hung."""


class MachineFailure(RuntimeError):
    """The machine could not do the work (memory exhausted, a worker process killed);
    the message names what and what to lower. Exit status 1."""


PREEMPTED_EXIT_STATUS = 75
"""Exit status of a preempted run (EX_TEMPFAIL): requeue it to continue."""


class PreemptedError(Exception):
    """The run stopped on a preemption signal; resubmitting it resumes."""


INTERRUPTED_EXIT_STATUS = 130
"""Exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it)."""


class InterruptedRun(PreemptedError):
    """The run stopped on Ctrl-C (SIGINT), after its step's checkpoint or, on a second
    Ctrl-C, at once; the same command resumes it."""


RESUME_HINT = (
    "the run's checkpoints are intact: free space or fix the permission, then run the "
    "same command again to resume"
)
"""What a write failure during training means for the run, for the end of its message."""


def write_failure(what: str | os.PathLike[str], exc: OSError, after: str = "") -> WriteFailure:
    """The :class:`WriteFailure` of ``exc`` raised while writing ``what``; ``after``
    (what it means for the run) ends the message."""
    message = f"cannot write {os.fspath(what)}: {exc.strerror or exc}"
    return WriteFailure(f"{message}; {after}" if after else message)


@contextmanager
def writing(what: str | os.PathLike[str], after: str = "") -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into a :class:`WriteFailure` naming ``what``
    (a ``BrokenPipeError`` stays itself).

    Example::

        with writing(path, RESUME_HINT):
            path.write_text(text)
    """
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_failure(what, exc, after) from exc


class LineHandler(logging.StreamHandler):
    """A stream handler for log lines whose failed write raises, instead of printing a
    traceback and going on without its lines (what :class:`logging.StreamHandler` does).

    An ``OSError`` becomes a :class:`WriteFailure` naming ``what`` (a ``BrokenPipeError``
    stays itself); after it the handler drops every record, so the run's
    ``on_exception`` handlers can still log elsewhere. Other errors (a stream already
    closed) go to :meth:`logging.Handler.handleError`, as with any handler.
    """

    def __init__(self, stream: TextIO, what: str, after: str = "") -> None:
        super().__init__(stream)
        self.what = what
        self.after = after
        self.failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed:
            return
        text = self.format(record) + self.terminator
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as exc:
            self.failed = True
            if isinstance(exc, BrokenPipeError):
                raise
            raise write_failure(self.what, exc, self.after) from exc
        except WriteFailure:
            self.failed = True
            raise
        except Exception:  # a closed or foreign stream: as logging.StreamHandler does
            self.handleError(record)

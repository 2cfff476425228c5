"""The errors the ``hookbus`` command turns into one line and an exit status: a user's
mistake (2), a write or a collective that failed (1), a preempted run (75)."""

from __future__ import annotations


class UserError(Exception):
    """A problem in the user's input (a config, an override, a path): not a hookbus bug."""


class ConfigError(UserError, ValueError):
    """A config that cannot be read or does not validate; the message names where."""


class DataError(UserError):
    """Data that cannot be read (a missing folder, an unreadable image); the message names it."""


class CheckpointError(UserError):
    """A checkpoint that cannot be read or does not fit this run; the message names it."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk, say); the previous one is intact."""


class OutputWriteError(RuntimeError):
    """A command's output file (an export, a plot) could not be written (a full disk, a
    read-only folder); nothing half-written is left. Exit status 1."""


class CollectiveFailure(RuntimeError):
    """A collective across ranks failed because another rank died or hung."""


PREEMPTED_EXIT_STATUS = 75
"""Exit status of a preempted run (EX_TEMPFAIL): requeue it to continue."""


class PreemptedError(Exception):
    """The run stopped on a preemption signal; resubmitting it resumes."""

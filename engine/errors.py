"""Errors that are the user's to fix: the CLI prints them in one line and exits with 2."""

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

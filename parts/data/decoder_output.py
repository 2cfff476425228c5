"""What an image decoder prints to the terminal, kept off it.

The libjpeg-turbo inside torchvision's JPEG decoder writes its warnings about damaged
data ("Corrupt JPEG data: premature end of data segment") with C's ``fprintf`` straight
to the process's standard error, file descriptor 2, past Python's ``sys.stderr``: on a
terminal they came before hookbus's own line about the same file. (Pillow's decoders
print nothing; their failures are exceptions.) :func:`decoder_output` points descriptor 2 at a
scratch file while an image decodes and gives back what libjpeg wrote there:

- the decoder's lines are never shown; the decode's caller puts them into its one line
  when the image cannot be read, and drops them when it decoded (libjpeg recovered, the
  image is what viewers show);
- anything else written to descriptor 2 meanwhile (another thread's log line) is written
  to the real standard error when the decode ends, so nothing else is lost.

A lock makes the redirections of threads of one process take turns (each restores what
it found), a capture inside another of the same thread leaves the redirection to it, and
a worker process (forked) makes its own scratch file.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

MAX_KEPT = 64 << 10
"""The most bytes of a decode's output read back (libjpeg prints its first warning only)."""

DECODER_LINE = re.compile(
    r"^(Corrupt JPEG data|Premature end of JPEG file|Warning: unknown JFIF|Inconsistent "
    r"progression sequence|Invalid SOS parameters|Application transferred too|Unknown Adobe "
    r"color transform)"
)
"""The start of each warning libjpeg prints (its ``JWRN_*`` messages)."""

_lock = threading.Lock()
_capturing = threading.local()
_scratch: tuple[int, IO[bytes]] | None = None


@dataclass
class DecoderOutput:
    """The lines the decoder printed (``lines``), filled in when the decode ends."""

    lines: tuple[str, ...] = ()


def _scratch_file() -> IO[bytes]:
    """This process's scratch file (a forked worker makes its own)."""
    global _scratch
    if _scratch is None or _scratch[0] != os.getpid():
        # Open for the life of the process: every decode of it reuses the file.
        _scratch = (os.getpid(), tempfile.TemporaryFile())  # noqa: SIM115
    return _scratch[1]


@contextmanager
def decoder_output() -> Iterator[DecoderOutput]:
    """Descriptor 2 into a scratch file for the ``with`` block; the decoder's lines in the
    yielded :class:`DecoderOutput` afterwards, any other text written to the real
    standard error."""
    output = DecoderOutput()
    if getattr(_capturing, "on", False):  # inside another capture of this thread: its
        yield output  # lines reach that one
        return
    with _lock:
        _capturing.on = True
        scratch = _scratch_file()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(scratch.fileno(), 2)
        try:
            yield output
        finally:
            _capturing.on = False
            os.dup2(saved, 2)
            os.close(saved)
            written = os.lseek(scratch.fileno(), 0, os.SEEK_CUR)
            text = b""
            if written:
                os.lseek(scratch.fileno(), 0, os.SEEK_SET)
                text = os.read(scratch.fileno(), min(written, MAX_KEPT))
                os.ftruncate(scratch.fileno(), 0)
                os.lseek(scratch.fileno(), 0, os.SEEK_SET)
    lines = text.decode("utf-8", "replace").splitlines()
    output.lines = tuple(line.strip() for line in lines if DECODER_LINE.match(line))
    others = [line for line in lines if line.strip() and not DECODER_LINE.match(line)]
    if others:
        os.write(2, ("\n".join(others) + "\n").encode())

"""The work a run owes after its last step, and the record that it is still owed.

After the last phase the trainer fires ``on_end``: the evaluation report
(``evaluation.json``), the summary plot (``curves.png``), the trackers' uploads. That work
can be stopped like training (two SIGTERMs, a SIGKILL, a full disk), after the final
checkpoint was written. A run whose final checkpoint exists is complete as far as
training goes, so without a record a rerun would find nothing to do and the report
would be lost for good.

So rank 0 writes :data:`PENDING_NAME` into the run directory before the run's first
step (:func:`owe_end_work`), and removes it only once every ``on_end`` handler returned
(:func:`settle_end_work`). A rerun that finds the final checkpoint and this file does the
end-of-run work again, from the final checkpoint, instead of saying "already complete".
A run directory of an older hookbus has no such file, and a finished run has none left:
both count as finished.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from hookbus.engine.checkpoint.checkpoint_io import write_text_atomic
from hookbus.engine.checkpoint.run_files import PENDING_NAME
from hookbus.engine.errors import RESUME_HINT, writing


def owe_end_work(run_dir: Path, handlers: Sequence[str]) -> None:
    """Record in ``run_dir`` that the ``on_end`` ``handlers`` have not run to the end
    (a :class:`~hookbus.engine.errors.WriteFailure` naming the file when it cannot)."""
    path = Path(run_dir) / PENDING_NAME
    text = (
        f"The end-of-run work of this run ({', '.join(handlers) or 'no handler'}) has not "
        "finished. Run the same command again: it does that work from the final checkpoint.\n"
    )
    with writing(path, RESUME_HINT):
        write_text_atomic(path, text)


def end_work_owed(run_dir: Path) -> bool:
    """Whether ``run_dir`` records end-of-run work that has not finished."""
    return os.path.lexists(Path(run_dir) / PENDING_NAME)


def settle_end_work(run_dir: Path) -> None:
    """Remove the record: every ``on_end`` handler returned."""
    path = Path(run_dir) / PENDING_NAME
    with writing(path, RESUME_HINT):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

"""The metrics-file hook: one JSON line per finished phase in ``run_dir/metrics.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.engine.bus.hook import Hook, rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.checkpoint.checkpoint_io import write_text_atomic
from hookbus.engine.checkpoint.run_files import open_append
from hookbus.engine.errors import RESUME_HINT, writing
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self

METRICS_FILE = "metrics.json"


@register_hook("metrics_json")
class MetricsJsonHook(Hook):
    """Appends one JSON object per finished phase to ``run_dir/metrics.json`` (rank 0).

    ===================  ==============================================  ====================
    event                reads                                           writes
    ===================  ==============================================  ====================
    ``on_phase_start``   ``rank``, ``run_dir``, ``phase_idx``            ``metrics.json``
                                                                         (first phase only)
    ``on_phase_end``     ``rank``, ``run_dir``, ``phase_idx``,           a line of
                         ``phase_name``, ``train``, ``train_phase_idx``,  ``metrics.json``
                         ``iteration``, ``phase_loss``,
                         ``metrics``
    ===================  ==============================================  ====================

    A line holds ``phase_idx``, ``phase``, ``train``, ``train_phase_idx``, ``iteration``,
    ``loss`` (the phase's mean loss, null without a batch) and every entry of
    ``metrics``. Each line is flushed and fsynced, so a crash loses no finished phase.
    At the hook's first ``on_phase_start``, one atomic rewrite drops the lines of that
    phase and of every later one (left by a run killed after writing them, or by an
    earlier run in the same directory with ``checkpoint.auto_resume: false``) and a line
    torn by a crash, which the next line would otherwise be glued to: a resumed run's
    file holds each phase once, byte for byte as an uninterrupted run writes it. A line
    that cannot be written (a full disk, a read-only file) stops the run with one line
    naming the file (:class:`~hookbus.engine.errors.WriteFailure`, exit status 1) before
    the phase's checkpoint, so a resumed run writes it. Writes nothing to the run state.

    Example::

        MetricsJsonHook().attach(trainer.engine)
        # after train(): [json.loads(line) for line in open(run_dir / "metrics.json")]
    """

    priority = Priority.REPORT

    def __init__(self, *, name: str | None = None, priority: int | None = None) -> None:
        super().__init__(name=name, priority=priority)
        self._first_phase = True

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The metrics-file hook (it has no settings)."""
        return cls()

    def on_phase_start(self, engine: RunEngine) -> None:
        if not self._first_phase:
            return
        self._first_phase = False
        if self.is_rank_zero(engine):
            drop_phases_from(Path(engine.state.run_dir) / METRICS_FILE, engine.state.phase_idx)

    @rank_zero_only
    def on_phase_end(self, engine: RunEngine) -> None:
        state = engine.state
        record = state.phase_record()
        path = Path(state.run_dir) / METRICS_FILE
        with writing(path, RESUME_HINT), open_append(state.run_dir, path) as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())


def drop_phases_from(path: Path, phase_idx: int) -> None:
    """Rewrite ``path`` atomically without the lines of phases ``phase_idx`` and later
    and without torn lines; nothing happens when it is missing or has none of them."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if -1 < _phase_of(line) < phase_idx]
    if len(kept) != len(lines):
        with writing(path, RESUME_HINT):
            write_text_atomic(path, "".join(line + "\n" for line in kept))


def _phase_of(line: str) -> int:
    """The ``phase_idx`` of a ``metrics.json`` line; -1 for a torn or foreign line."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return -1
    phase = row.get("phase_idx") if isinstance(row, dict) else None
    return phase if isinstance(phase, int) and phase >= 0 else -1

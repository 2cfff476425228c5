"""The metrics-file hook: one JSON line per finished phase in ``run_dir/metrics.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ignite.engine import Engine

from engine.config import Config
from engine.hook import Hook
from hooks import register_hook
from hooks.run_stats import phase_record

if TYPE_CHECKING:
    from typing_extensions import Self

METRICS_FILE = "metrics.json"


@register_hook("metrics_json")
class MetricsJsonHook(Hook):
    """Appends one JSON object per finished phase to ``run_dir/metrics.json`` (rank 0).

    ================  ==============================================  =====================
    event             reads                                           writes
    ================  ==============================================  =====================
    ``on_phase_end``  ``rank``, ``run_dir``, ``phase_idx``,           a line of
                      ``phase_name``, ``train``, ``train_phase_idx``,  ``metrics.json``
                      ``iteration``, ``loss_sum``, ``batches``,
                      ``metrics``
    ================  ==============================================  =====================

    A line holds ``phase_idx``, ``phase``, ``train``, ``train_phase_idx``, ``iteration``,
    ``loss`` (the phase's mean loss, null without a batch) and every entry of
    ``metrics``. Each line is flushed and fsynced, so a crash loses no finished phase.
    The file is appended to: a run resumed from before a finished phase writes that phase
    again, and readers keep the last line of each ``phase_idx``. Writes nothing to the
    run state.

    Example::

        MetricsJsonHook().attach(trainer.engine)
        rows = [json.loads(line) for line in open(run_dir / "metrics.json")]
    """

    priority = 30

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The metrics-file hook (it has no settings)."""
        return cls()

    def on_phase_end(self, engine: Engine) -> None:
        state = engine.state
        if state.rank != 0:
            return
        record = phase_record(state)
        path = Path(state.run_dir) / METRICS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())

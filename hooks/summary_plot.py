"""The summary-plot hook: loss, learning-rate and meter curves drawn into the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.engine.bus.hook import Hook, rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    METRICS_FILE,
    RunCurves,
    read_metrics_rows,
    write_curves,
    write_plot,
)
from hookbus.engine.errors import RESUME_HINT, writing
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self


@register_hook("summary_plot")
class SummaryPlotHook(Hook):
    """Records the run's curves and draws them into ``run_dir/curves.png`` at the end (rank 0).

    ==================  ========================================  ===========================
    event               reads                                     writes
    ==================  ========================================  ===========================
    ``on_start``        ``rank``, ``run_dir``, ``resumed_from``,  -- (after a resume from a
                        ``phase_idx``                             checkpoint without its
                                                                  state: the phases of
                                                                  ``metrics.json`` so far)
    ``on_step``         ``train``, ``iteration``, ``loss``,       every ``log_frequency``
                        ``lr``                                    train iterations: a point
                                                                  of the loss and lr curves
    ``on_phase_end``    ``phase_idx``, ``phase_name``,            the phase's record;
                        ``train``, ``train_phase_idx``,           ``curves.json``
                        ``iteration``, ``phase_loss``,
                        ``metrics``
    ``on_end``          ``run_dir``                               ``curves.json``,
                                                                  ``curves.png``,
                                                                  ``summary["curves"]``
    ==================  ========================================  ===========================

    The PNG has three panels against the train iteration: the loss (logged steps, and
    each phase's mean), the learning rate, and the meters (e.g. kNN top-1 of the test
    phases). ``float(loss)`` on logged iterations is the only per-step device sync.
    ``curves.json`` is rewritten at each phase end, so ``hookbus plot RUN_DIR`` can draw
    a run that is still going or was stopped; one that cannot be written (a full disk)
    stops the run with one line naming it (:class:`~hookbus.engine.errors.WriteFailure`,
    exit status 1) before the phase's checkpoint. The curves are checkpointed: a resumed
    run's plot covers the whole run.

    Example::

        SummaryPlotHook(log_frequency=10).attach(trainer.engine)
        # after train(): runs/default/curves.png
    """

    priority = Priority.REPORT

    def __init__(self, log_frequency: int) -> None:
        if log_frequency < 1:
            raise ValueError(f"log_frequency must be >= 1, got {log_frequency}")
        super().__init__()
        self.log_frequency = log_frequency
        self.curves = RunCurves()
        self._restored = False

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The summary plot at ``cfg.trainer.log_frequency``."""
        return cls(log_frequency=cfg.trainer.log_frequency)

    @rank_zero_only
    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        if self._restored or not state.resumed_from:
            return
        metrics_path = Path(state.run_dir) / METRICS_FILE
        if metrics_path.is_file():
            for row in read_metrics_rows(metrics_path):
                if row["phase_idx"] <= state.phase_idx:
                    self.curves.add_phase(row)

    @rank_zero_only
    def on_step(self, engine: RunEngine) -> None:
        if not self.every_n_train_iterations(engine, self.log_frequency):
            return
        state = engine.state
        loss = float(state.loss)  # type: ignore[arg-type]  # the step set it
        self.curves.add_step(state.iteration, loss, float(state.lr))

    @rank_zero_only
    def on_phase_end(self, engine: RunEngine) -> None:
        state = engine.state
        self.curves.add_phase(state.phase_record())
        run_dir = Path(state.run_dir)
        with writing(run_dir / CURVES_FILE, RESUME_HINT):
            write_curves(self.curves, run_dir)

    @rank_zero_only
    def on_end(self, engine: RunEngine) -> None:
        state = engine.state
        run_dir = Path(state.run_dir)
        with writing(run_dir / CURVES_FILE, RESUME_HINT):
            state.summary["curves"] = write_plot(self.curves, run_dir, str(run_dir))

    def state_dict(self) -> dict[str, Any]:
        return {"curves": self.curves.to_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curves = RunCurves.from_dict(state["curves"])
        self._restored = True

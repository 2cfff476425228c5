"""ExperimentTracker: what the W&B and MLflow hooks share (it is no hook of its own)."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.run_stats import phase_scalars
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.run_curves import PLOT_FILE
from hookbus.engine.errors import ConfigError

RESULT_FILES = (PLOT_FILE, "evaluation.json")
"""Files of the run directory a tracker keeps with its run at the end, when present."""


def require_package(package: str) -> None:
    """Raise a ConfigError naming the extra when ``package`` (``wandb``, ``mlflow``: the
    hook's config section and the extra's name too) is not installed."""
    if importlib.util.find_spec(package) is None:
        raise ConfigError(
            f"hooks.{package}.enabled: the {package} package is not installed; "
            f"pip install 'hookbus[{package}]'"
        )


class ExperimentTracker(Hook, ABC):
    """The base of the hooks that log a run to an experiment tracker, on rank 0.

    ==================  ====================================  =================================
    event               reads                                 writes (the tracker's run)
    ==================  ====================================  =================================
    ``on_step``         ``train``, ``iteration``, ``loss``,   every ``log_frequency`` train
                        ``lr``                                iterations: ``train/loss``,
                                                              ``train/lr`` @ ``iteration``
    ``on_phase_end``    ``phase_name``, ``phase_loss``,       ``<phase>/loss_epoch`` (mean
                        ``metrics`` and the phase's step      loss, when the phase had a
                                                              batch), ``<phase>/<metric>``
                                                              @ :meth:`phase_step`
    ``on_end``          ``run_dir``                           ``curves.png`` and
                                                              ``evaluation.json`` (when
                                                              present) with the run; ends it
    ``on_exception``    --                                    ends the run as failed
    ==================  ====================================  =================================

    A subclass opens its run at ``on_start`` (rank 0 only: the other ranks never open one,
    so every other handler does nothing there) and sets ``run_id``; it says whether a run
    is open (:attr:`is_open`), how to log scalars (:meth:`log_scalars`), at which step a
    phase's results go (:meth:`phase_step`), how files join the run (:meth:`save_results`)
    and how the run ends (:meth:`close`). The run id is the hook's state: a run resumed
    from a checkpoint reopens the same tracker run. ``float(loss)`` on logged iterations
    is the only per-step device sync. Priority ``REPORT+10``: after the reports, so that
    the files the summary plot and the evaluation report write at ``on_end`` exist. Writes
    nothing to the run state.
    """

    priority = Priority.REPORT + 10
    package: str = ""
    """The tracker's package, its config section under ``hooks`` and its extra's name."""

    def __init__(self, log_frequency: int) -> None:
        if log_frequency < 1:
            raise ValueError(f"log_frequency must be >= 1, got {log_frequency}")
        require_package(self.package)
        super().__init__(name=self.package)
        self.log_frequency = log_frequency
        self.run_id: str | None = None

    @property
    @abstractmethod
    def is_open(self) -> bool:
        """Whether a tracker run is open (rank 0, from ``on_start`` to the end)."""

    @abstractmethod
    def log_scalars(self, scalars: dict[str, float], step: int) -> None:
        """Log ``scalars`` at ``step`` into the open run."""

    @abstractmethod
    def phase_step(self, state: RunState) -> int:
        """The step a phase's results are logged at."""

    @abstractmethod
    def save_results(self, files: list[Path]) -> None:
        """Keep ``files`` (of the run directory) with the open run."""

    @abstractmethod
    def close(self, *, failed: bool) -> None:
        """End the open run, as failed or as finished; nothing when none is open."""

    def on_step(self, engine: RunEngine) -> None:
        if not self.is_open or not self.every_n_train_iterations(engine, self.log_frequency):
            return
        state = engine.state
        loss = float(state.loss)  # type: ignore[arg-type]  # the step set it
        self.log_scalars({"train/loss": loss, "train/lr": float(state.lr)}, state.iteration)

    def on_phase_end(self, engine: RunEngine) -> None:
        if not self.is_open:
            return
        scalars = phase_scalars(engine.state)
        if scalars:
            self.log_scalars(scalars, self.phase_step(engine.state))

    def on_end(self, engine: RunEngine) -> None:
        if not self.is_open:
            return
        run_dir = Path(engine.state.run_dir)
        self.save_results([run_dir / name for name in RESULT_FILES if (run_dir / name).is_file()])
        self.close(failed=False)

    def on_exception(self, engine: RunEngine) -> None:
        self.close(failed=True)

    def state_dict(self) -> dict[str, Any]:
        """``{"run_id": ...}``: the tracker run a resumed run reopens."""
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.run_id = state["run_id"]

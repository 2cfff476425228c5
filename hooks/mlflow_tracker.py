"""The MLflow hook: a run's scalars, config and result files in an MLflow run."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hookbus.engine.bus.hook import rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.config.config_changes import flatten
from hookbus.engine.errors import UserError
from hookbus.hooks.experiment_tracker import ExperimentTracker
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient
    from typing_extensions import Self

logger = logging.getLogger("hookbus")

LOCAL_STORE = "mlflow.db"
"""The local store's database in the run directory, when no tracking URI is given."""

LOCAL_ARTIFACTS = "mlartifacts"
"""The local store's artifact folder in the run directory."""

PARAMS_PER_CALL = 100
"""MLflow takes at most 100 parameters in one ``log_batch`` call."""


@register_hook("mlflow")
class MlflowHook(ExperimentTracker):
    """Logs the run to MLflow, on rank 0.

    ==================  ====================================  =================================
    event               reads                                 writes (MLflow run)
    ==================  ====================================  =================================
    ``on_start``        ``rank``, ``run_dir``, ``cfg``        opens the run (a resumed run
                                                              reopens the checkpoint's run
                                                              id); the effective config as
                                                              parameters (dotted keys) and
                                                              ``config.yaml`` as an artifact
    ``on_step``         ``train``, ``iteration``, ``loss``,   every ``log_frequency`` train
                        ``lr``                                iterations: ``train/loss``,
                                                              ``train/lr`` @ ``iteration``
    ``on_phase_end``    ``phase_name``, ``train_phase_idx``,  ``<phase>/loss_epoch`` (mean
                        ``phase_loss``, ``metrics``           loss, when the phase had a
                                                              batch), ``<phase>/<metric>``
                                                              @ ``train_phase_idx``
    ``on_end``          ``run_dir``                           ``curves.png`` and
                                                              ``evaluation.json`` (when
                                                              present) as artifacts; ends
                                                              the run as ``FINISHED``
    ``on_exception``    --                                    ends the run as ``FAILED``
    ==================  ====================================  =================================

    The metric names and steps are TensorBoard's. Without a tracking URI the store is
    local, in the run directory: ``mlflow.db`` (SQLite) with the artifacts in
    ``mlartifacts/``. Priority ``REPORT+10``: after the reports, so that the files the
    summary plot and the evaluation report write at ``on_end`` exist when this hook logs
    them. The run id is checkpointed: a run resumed from a checkpoint reopens the same
    MLflow run (a warning starts a new one when the store no longer has it). MLflow
    keeps a parameter's first value: a resumed run that changed a key (training longer)
    logs the keys that are new, warns about the changed ones, and logs the new
    ``config.yaml``. ``float(loss)`` on logged iterations is the only per-step device
    sync. Writes nothing to the run state.

    Example::

        MlflowHook(log_frequency=10).attach(trainer.engine)
        # mlflow ui --backend-store-uri sqlite:///runs/default/mlflow.db
    """

    package = "mlflow"

    def __init__(
        self,
        log_frequency: int,
        *,
        tracking_uri: str | None = None,
        experiment: str = "hookbus",
        run_name: str | None = None,
    ) -> None:
        super().__init__(log_frequency)
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.client: MlflowClient | None = None

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The MLflow hook of ``cfg.hooks.mlflow`` at ``cfg.trainer.log_frequency``."""
        section = cfg.hooks.mlflow
        return cls(
            cfg.trainer.log_frequency,
            tracking_uri=section.tracking_uri,
            experiment=section.experiment,
            run_name=section.run_name,
        )

    @rank_zero_only
    def on_start(self, engine: RunEngine) -> None:
        # Imported here: mlflow takes about a second to import, paid only by runs that
        # log to it.
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        state = engine.state
        run_dir = Path(state.run_dir).resolve()
        uri = self.tracking_uri or f"sqlite:///{run_dir / LOCAL_STORE}"
        try:
            client = MlflowClient(uri)
            logged = self._open_run(client, run_dir)
            config = state.cfg.model_dump(mode="json") if state.cfg is not None else {}
            self._log_params(client, logged, flatten(config))
            if (run_dir / "config.yaml").is_file():
                client.log_artifact(self.run_id, str(run_dir / "config.yaml"))
        except MlflowException as exc:
            raise UserError(f"hooks.mlflow: {uri}: {exc.message}") from None
        self.client = client
        logger.info("MLflow run %s in %s (experiment %r)", self.run_id, uri, self.experiment)

    @property
    def is_open(self) -> bool:
        return self.client is not None

    def phase_step(self, state: RunState) -> int:
        """The ``train_phase_idx``, as TensorBoard's."""
        return state.train_phase_idx

    def save_results(self, files: list[Path]) -> None:
        assert self.client is not None
        for path in files:
            self.client.log_artifact(self.run_id, str(path))

    def close(self, *, failed: bool) -> None:
        if self.client is not None:
            status = "FAILED" if failed else "FINISHED"
            self.client.set_terminated(cast(str, self.run_id), status=status)  # the run is open
            self.client = None

    def _open_run(self, client: MlflowClient, run_dir: Path) -> dict[str, str]:
        """Reopen the checkpoint's run, or create one; returns the parameters it has."""
        from mlflow.exceptions import MlflowException

        if self.run_id is not None:
            try:
                run = client.get_run(self.run_id)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                    raise
                logger.warning(
                    "MLflow run %s of the checkpoint is not in the store: a new run begins",
                    self.run_id,
                )
            else:
                client.update_run(self.run_id, status="RUNNING")
                return dict(run.data.params)
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            artifacts = None if self.tracking_uri else (run_dir / LOCAL_ARTIFACTS).as_uri()
            experiment_id = client.create_experiment(self.experiment, artifact_location=artifacts)
        elif experiment.lifecycle_stage == "deleted":
            raise UserError(
                f"hooks.mlflow.experiment: {self.experiment!r} is deleted in the store; "
                "restore it or name another experiment"
            )
        else:
            experiment_id = experiment.experiment_id
        self.run_id = client.create_run(experiment_id, run_name=self.run_name).info.run_id
        return {}

    def _log_params(
        self, client: MlflowClient, logged: dict[str, str], config: dict[str, Any]
    ) -> None:
        """Log the keys of ``config`` the run does not have; warn about changed ones."""
        from mlflow.entities import Param

        values = {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in config.items()
        }
        new = [Param(key, value) for key, value in values.items() if key not in logged]
        for start in range(0, len(new), PARAMS_PER_CALL):
            batch = new[start : start + PARAMS_PER_CALL]
            client.log_batch(cast(str, self.run_id), params=batch)  # the run is open
        changed = [
            f"{key}: {logged[key]} -> {value}"
            for key, value in values.items()
            if key in logged and logged[key] != value
        ]
        if changed:
            logger.warning(
                "MLflow run %s keeps the first value of each parameter; changed since: %s "
                "(its config.yaml artifact has the values in use)",
                self.run_id,
                "; ".join(changed),
            )

    def log_scalars(self, scalars: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        assert self.client is not None
        stamp = int(time.time() * 1000)
        metrics = [Metric(key, float(value), stamp, step) for key, value in scalars.items()]
        self.client.log_batch(cast(str, self.run_id), metrics=metrics)  # the run is open

"""The Weights & Biases hook: a run's scalars, config and result files in a W&B run."""

from __future__ import annotations

import importlib.util
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ignite.engine import Engine

from hookbus.engine.config import Config
from hookbus.engine.errors import ConfigError, UserError
from hookbus.engine.hook import Hook, rank_zero_only
from hookbus.engine.priorities import Priority
from hookbus.hooks.plot import PLOT_FILE
from hookbus.hooks.registry import register_hook
from hookbus.hooks.run_stats import phase_scalars

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("hookbus")

RESULT_FILES = (PLOT_FILE, "evaluation.json")
"""Files of the run directory the hook copies into the W&B run at the end, when present."""


def require_wandb() -> None:
    """Raise a ConfigError naming the extra when the ``wandb`` package is not installed."""
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "hooks.wandb.enabled: the wandb package is not installed; pip install 'hookbus[wandb]'"
        )


@register_hook("wandb")
class WandbHook(Hook):
    """Logs the run to Weights & Biases, on rank 0.

    ==================  ====================================  =================================
    event               reads                                 writes (W&B run)
    ==================  ====================================  =================================
    ``on_start``        ``rank``, ``run_dir``, ``cfg``        opens the run (a resumed run
                                                              reopens the checkpoint's run
                                                              id); the effective config as
                                                              the run's config
    ``on_step``         ``train``, ``iteration``, ``loss``,   every ``log_frequency`` train
                        ``lr``                                iterations: ``train/loss``,
                                                              ``train/lr`` @ ``iteration``
    ``on_phase_end``    ``phase_name``, ``iteration``,        ``<phase>/loss_epoch`` (mean
                        ``phase_loss``, ``metrics``           loss, when the phase had a
                                                              batch), ``<phase>/<metric>``
                                                              @ ``iteration``
    ``on_end``          ``run_dir``                           copies ``curves.png`` and
                                                              ``evaluation.json`` (when
                                                              present) into the run's files;
                                                              finishes the run
    ``on_exception``    --                                    finishes the run as failed
    ==================  ====================================  =================================

    Priority ``REPORT+10``: after the reports, so that the files the summary plot and the
    evaluation report write at ``on_end`` exist when this hook copies them. W&B wants
    one growing step for a run: every value is logged at the train ``iteration``, the
    phase results at the iteration their phase ended on (a test phase shares it with the
    train phase before it). The run id is checkpointed: a run resumed from a checkpoint
    logs into the same W&B run (``resume="allow"``); in offline mode each start adds an
    ``offline-run-*-<id>`` folder under ``<dir>/wandb``, and ``wandb sync`` uploads them
    into one run. ``float(loss)`` on logged iterations is the only per-step device sync.
    Mode ``disabled`` opens no run. ``hook.run`` is the open ``wandb`` run (rank 0, from
    ``on_start`` to the end), else None. Writes nothing to the run state.

    Example::

        WandbHook(log_frequency=10, mode="offline").attach(trainer.engine)
        # wandb sync runs/default/wandb/offline-run-*
    """

    priority = Priority.REPORT + 10

    def __init__(
        self,
        log_frequency: int,
        *,
        project: str = "hookbus",
        entity: str | None = None,
        mode: Literal["online", "offline", "disabled"] = "online",
        run_name: str | None = None,
        tags: Sequence[str] = (),
        dir: str | Path | None = None,
    ) -> None:
        if log_frequency < 1:
            raise ValueError(f"log_frequency must be >= 1, got {log_frequency}")
        require_wandb()
        super().__init__(name="wandb")
        self.log_frequency = log_frequency
        self.project = project
        self.entity = entity
        self.mode = mode
        self.run_name = run_name
        self.tags = list(tags)
        self.dir = None if dir is None else Path(dir)
        self.run_id: str | None = None
        self.run: Any = None

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The W&B hook of ``cfg.hooks.wandb`` at ``cfg.trainer.log_frequency``."""
        section = cfg.hooks.wandb
        return cls(
            cfg.trainer.log_frequency,
            project=section.project,
            entity=section.entity,
            mode=section.mode,
            run_name=section.run_name,
            tags=section.tags,
            dir=section.dir,
        )

    @rank_zero_only
    def on_start(self, engine: Engine) -> None:
        if self.mode == "disabled":
            return
        # Imported here: wandb takes about half a second to import, paid only by runs
        # that log to it.
        import wandb

        state = engine.state
        folder = self.dir if self.dir is not None else Path(state.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self.run = wandb.init(
                project=self.project,
                entity=self.entity,
                mode=self.mode,
                name=self.run_name,
                tags=self.tags,
                dir=str(folder),
                id=self.run_id,
                resume="allow",
                config=state.cfg.model_dump(mode="json") if state.cfg is not None else {},
                reinit="create_new",
                settings=wandb.Settings(console="off", silent=True),
            )
        except wandb.errors.Error as exc:
            raise UserError(
                f"hooks.wandb: cannot start the W&B run: {exc} (hooks.wandb.mode=offline "
                "logs to disk without an account)"
            ) from None
        resumed = "resumed" if self.run_id else "new"
        self.run_id = self.run.id
        where = self.run.url if self.mode == "online" else Path(self.run.dir).parent
        logger.info("W&B run %s (%s, %s): %s", self.run_id, self.mode, resumed, where)

    def on_step(self, engine: Engine) -> None:
        if self.run is None or not self.every_n_train_iterations(engine, self.log_frequency):
            return
        state = engine.state
        scalars = {"train/loss": float(state.loss), "train/lr": float(state.lr)}
        self.run.log(scalars, step=state.iteration)

    def on_phase_end(self, engine: Engine) -> None:
        if self.run is None:
            return
        state = engine.state
        scalars = phase_scalars(state)
        if scalars:
            self.run.log(scalars, step=state.iteration)

    def on_end(self, engine: Engine) -> None:
        if self.run is None:
            return
        files = Path(self.run.dir)
        for name in RESULT_FILES:
            source = Path(engine.state.run_dir) / name
            if source.is_file():
                # A copy, not W&B's link to the file: an offline run keeps the file as it
                # was at its end, whatever a resumed run later writes over it.
                shutil.copyfile(source, files / name)
                self.run.save(str(files / name), base_path=str(files), policy="now")
        self._finish(exit_code=0)

    def on_exception(self, engine: Engine) -> None:
        self._finish(exit_code=1)

    def state_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.run_id = state["run_id"]

    def _finish(self, exit_code: int) -> None:
        if self.run is not None:
            self.run.finish(exit_code=exit_code)
            self.run = None

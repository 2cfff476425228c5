"""The Weights & Biases hook: a run's scalars, config and result files in a W&B run."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hookbus.engine.bus.hook import rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.errors import UserError
from hookbus.hooks.experiment_tracker import ExperimentTracker
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("hookbus")


@register_hook("wandb")
class WandbHook(ExperimentTracker):
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
    into one run. W&B's service process writes an offline run's last records after
    ``finish()`` returns, and is done when the interpreter exits (W&B's exit handler waits
    for it) or ``wandb.teardown()`` returns: a script that reads or syncs an offline
    folder in the process that trained calls ``wandb.teardown()`` first. ``float(loss)``
    on logged iterations is the only per-step device sync.
    Mode ``disabled`` opens no run. ``hook.run`` is the open ``wandb`` run (rank 0, from
    ``on_start`` to the end), else None. Writes nothing to the run state.

    Example::

        WandbHook(log_frequency=10, mode="offline").attach(trainer.engine)
        # wandb sync runs/default/wandb/offline-run-*
    """

    package = "wandb"

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
        super().__init__(log_frequency)
        self.project = project
        self.entity = entity
        self.mode = mode
        self.run_name = run_name
        self.tags = list(tags)
        self.dir = None if dir is None else Path(dir)
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
    def on_start(self, engine: RunEngine) -> None:
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

    @property
    def is_open(self) -> bool:
        return self.run is not None

    def log_scalars(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def phase_step(self, state: RunState) -> int:
        """The train ``iteration``: W&B's steps only grow."""
        return state.iteration

    def save_results(self, files: list[Path]) -> None:
        folder = Path(self.run.dir)
        for source in files:
            # A copy, not W&B's link to the file: an offline run keeps the file as it
            # was at its end, whatever a resumed run later writes over it.
            shutil.copyfile(source, folder / source.name)
            self.run.save(str(folder / source.name), base_path=str(folder), policy="now")

    def close(self, *, failed: bool) -> None:
        if self.run is not None:
            self.run.finish(exit_code=1 if failed else 0)
            self.run = None

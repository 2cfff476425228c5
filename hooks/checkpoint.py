"""CheckpointHook: atomic checkpoints every N train phases and every N iterations."""

from __future__ import annotations

import logging
from pathlib import Path

from ignite.engine import Engine

from engine.checkpoint_io import checkpoint_name, point_to_newest, remove_old, save_atomic
from engine.config import Config
from engine.errors import CheckpointWriteError
from engine.hook import Hook
from engine.training_state import collect_training_state
from hooks import register_hook

logger = logging.getLogger("hookbus")


@register_hook("checkpoint")
class CheckpointHook(Hook):
    """Writes checkpoints into ``directory`` (rank 0 only).

    ==================  ============================================================
    fires               ``on_step`` (train phases, every ``iter_frequency`` iterations;
                        any step after ``state.stop_requested`` is set by a preemption
                        signal) and ``on_phase_end`` (every ``phase_frequency`` train phases,
                        and always after the last phase of the plan)
    reads               counters, phases, model, optimizer, scaler, loss_fn, meters,
                        hooks' ``state_dict()``, RNG states, cfg
    writes              ``phaseNNNNN_batchNNNNNNN.torch`` (atomic: temporary file,
                        fsync, rename), the link ``checkpoint.torch`` to the newest,
                        and removes files beyond the ``keep_last`` newest
    ==================  ============================================================

    It runs last (priority 100) so that the other hooks' state is up to date when saved.

    Example::

        CheckpointHook(Path("runs/x"), phase_frequency=1, iter_frequency=500).attach(engine)
    """

    priority = 100

    def __init__(
        self,
        directory: Path,
        *,
        phase_frequency: int = 1,
        iter_frequency: int = 0,
        keep_last: int = 2,
    ) -> None:
        super().__init__()
        if phase_frequency < 0 or iter_frequency < 0:
            raise ValueError("checkpoint frequencies must be >= 0 (0 turns one off)")
        if keep_last < 1:
            raise ValueError("keep_last must be >= 1")
        self.directory = Path(directory)
        self.phase_frequency = phase_frequency
        self.iter_frequency = iter_frequency
        self.keep_last = keep_last

    @classmethod
    def from_config(cls, cfg: Config) -> CheckpointHook:
        """Built from the ``checkpoint`` section."""
        section = cfg.checkpoint
        return cls(
            section.dir,
            phase_frequency=section.phase_frequency,
            iter_frequency=section.iter_frequency,
            keep_last=section.keep_last,
        )

    def on_step(self, engine: Engine) -> None:
        state = engine.state
        if state.stop_requested:
            self.save(engine, phase_done=False)
            return
        if not state.train or not self.iter_frequency or state.iteration % self.iter_frequency:
            return
        if state.batches == state.phase_length:
            return  # the phase-end checkpoint follows at once
        self.save(engine, phase_done=False)

    def on_phase_end(self, engine: Engine) -> None:
        state = engine.state
        last_phase = state.phase_idx == len(state.phases) - 1
        due = (
            state.train
            and self.phase_frequency
            and (state.train_phase_idx + 1) % self.phase_frequency == 0
        )
        if due or last_phase:
            self.save(engine, phase_done=True)

    def save(self, engine: Engine, *, phase_done: bool) -> Path | None:
        """Write a checkpoint of the run now; returns its path (None on other ranks)."""
        state = engine.state
        if state.rank != 0:
            return None
        checkpoint = collect_training_state(state, phase_done=phase_done)
        path = self.directory / checkpoint_name(state.phase_idx, state.batches)
        try:
            save_atomic(checkpoint, path)
        except OSError as exc:
            raise CheckpointWriteError(
                f"cannot write checkpoint {path}: {exc.strerror or exc}; the previous "
                f"checkpoint in {self.directory} is intact"
            ) from exc
        point_to_newest(self.directory, path.name)
        remove_old(self.directory, self.keep_last)
        logger.debug("checkpoint written: %s", path)
        return path

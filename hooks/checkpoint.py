"""CheckpointHook: atomic checkpoints every N train phases and every N iterations."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.checkpoint.checkpoint_io import (
    checkpoint_name,
    list_checkpoints,
    point_to_newest,
    remove_old,
    save_atomic,
)
from hookbus.engine.checkpoint.checkpoint_writer import CheckpointWriter
from hookbus.engine.checkpoint.sharded_checkpoint import save_sharded
from hookbus.engine.checkpoint.training_state import collect_training_state
from hookbus.engine.errors import CheckpointWriteError
from hookbus.parts.config import Config

logger = logging.getLogger("hookbus")


@register_hook("checkpoint")
class CheckpointHook(Hook):
    """Writes checkpoints into ``directory`` (rank 0 only; every rank with ``sharded``).

    ==================  ============================================================
    fires               ``on_step`` (train phases, every ``iter_frequency`` iterations;
                        any step after ``state.stop_requested`` is set by a preemption
                        signal) and ``on_phase_end`` (every ``phase_frequency`` train phases,
                        and always after the last phase of the plan); ``on_end``
                        after ``engine.terminate()`` ended the run early (the
                        checkpoint records ``stopped_by``; inside a phase when the
                        run stopped inside one); ``on_end`` and ``on_exception``
                        wait for a background write (async_write)
    reads               counters, phases, ``stopped_by``, model, optimizer, scaler,
                        loss_fn, meters,
                        hooks' ``state_dict()``, RNG states, cfg
    writes              ``phaseNNNNN_batchNNNNNNN.torch`` (atomic: temporary file,
                        fsync, rename), the link ``checkpoint.torch`` to the newest,
                        and removes files beyond the ``keep_last`` newest
    ==================  ============================================================

    It runs last (priority 100) so that the other hooks' state is up to date when saved.

    With ``async_write`` the state is copied to host memory at the step boundary and
    written by a background thread
    (:class:`hookbus.engine.checkpoint.checkpoint_writer.CheckpointWriter`):
    training waits for the copy only. A new checkpoint waits for the previous write; a
    failed write raises its error at the next checkpoint, at the next phase end, or at
    ``on_end`` / ``on_exception`` at the latest. The link and the rotation follow the
    file, on the writer thread, so ``checkpoint.torch`` always names a complete file.

    Example::

        from pathlib import Path

        CheckpointHook(Path("runs/x"), phase_frequency=1, iter_frequency=500).attach(trainer.engine)
    """

    priority = Priority.LAST
    run_fields = ("phases", "cfg", "base_model", "optimizer", "loss_fn")

    def __init__(
        self,
        directory: Path,
        *,
        phase_frequency: int = 1,
        iter_frequency: int = 0,
        keep_last: int = 2,
        async_write: bool = False,
        sharded: bool = False,
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
        if sharded and async_write:
            raise ValueError("a sharded checkpoint is written by every rank at the step")
        self.sharded = sharded
        self._writer = CheckpointWriter() if async_write else None
        self._phase_open: bool | None = None  # None until a phase starts in this run

    @classmethod
    def from_config(cls, cfg: Config) -> CheckpointHook:
        """Built from the ``checkpoint`` section."""
        section = cfg.checkpoint
        return cls(
            section.dir,
            phase_frequency=section.phase_frequency,
            iter_frequency=section.iter_frequency,
            keep_last=section.keep_last,
            async_write=section.async_write,
            sharded=cfg.distributed.strategy == "fsdp",
        )

    def on_phase_start(self, engine: RunEngine) -> None:
        self._phase_open = True

    def on_step(self, engine: RunEngine) -> None:
        state = engine.state
        if state.stop_requested:
            self.save(engine, phase_done=False)
            return
        if not self.every_n_train_iterations(engine, self.iter_frequency):
            return
        if state.batches == state.phase_length:
            return  # the phase-end checkpoint follows at once
        self.save(engine, phase_done=False)

    def on_phase_end(self, engine: RunEngine) -> None:
        if self._writer is not None:
            self._writer.raise_if_failed()
        state = engine.state
        last_phase = state.phase_idx == len(state.phases) - 1
        due = (
            state.train
            and self.phase_frequency
            and (state.train_phase_idx + 1) % self.phase_frequency == 0
        )
        if due or last_phase:
            self.save(engine, phase_done=True)
        self._phase_open = False

    def on_end(self, engine: RunEngine) -> None:
        if engine.state.stopped_by is not None and self._phase_open is not None:
            self.save(engine, phase_done=not self._phase_open)
        self.wait()

    def on_exception(self, engine: RunEngine) -> None:
        self.wait()

    def save(self, engine: RunEngine, *, phase_done: bool) -> Path | None:
        """Checkpoint the run now; returns the file's path (None on other ranks).

        With ``async_write`` the file is written in the background: :meth:`wait` for it.
        With ``sharded`` every rank writes its shards
        (:func:`hookbus.engine.checkpoint.sharded_checkpoint.save_sharded`).
        """
        state = engine.state
        if self.sharded:
            path = self.directory / checkpoint_name(state.phase_idx, state.batches)
            checkpoint = collect_training_state(state, phase_done=phase_done)
            save_sharded(checkpoint, path, keep_last=self.keep_last)
            return path if self.is_rank_zero(engine) else None
        if not self.is_rank_zero(engine):
            return None
        checkpoint = collect_training_state(state, phase_done=phase_done)
        path = self.directory / checkpoint_name(state.phase_idx, state.batches)
        if self._writer is None:
            self._write(checkpoint, path)
        else:
            self._writer.submit(partial(self._write, path=path), checkpoint)
        return path

    def wait(self) -> None:
        """Block until a checkpoint written in the background is on disk; raise its error."""
        if self._writer is not None:
            self._writer.wait()

    def _write(self, checkpoint: dict[str, Any], path: Path) -> None:
        """Write ``checkpoint`` to ``path``, point ``checkpoint.torch`` at it, rotate."""
        try:
            save_atomic(checkpoint, path)
        except OSError as exc:
            previous = (
                f"the previous checkpoint in {self.directory} is intact"
                if list_checkpoints(self.directory)
                else f"no checkpoint was written in {self.directory} yet"
            )
            raise CheckpointWriteError(
                f"cannot write checkpoint {path}: {exc.strerror or exc}; {previous}"
            ) from exc
        point_to_newest(self.directory, path.name)
        remove_old(self.directory, self.keep_last)
        logger.debug("checkpoint written: %s", path)

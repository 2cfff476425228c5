"""The TensorBoard hook: training curves and phase results in ``run_dir/tensorboard``."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.summary import scalar

from hookbus.engine.bus.hook import Hook, rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.run_stats import phase_scalars, recent_batch_time
from hookbus.engine.checkpoint.run_files import inside_run_dir
from hookbus.engine.errors import RESUME_HINT, writing
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self

TENSORBOARD_DIR = "tensorboard"


@register_hook("tensorboard")
class TensorBoardHook(Hook):
    """Writes TensorBoard scalars with tensorboardX, on rank 0.

    ==================  ====================================  =================================
    event               reads                                 writes (scalar @ global step)
    ==================  ====================================  =================================
    ``on_start``        ``rank``, ``run_dir``                 opens an event file in
                                                              ``run_dir/tensorboard``
    ``on_step``         ``train``, ``iteration``, ``loss``,   every ``log_frequency`` train
                        ``lr``, ``batch_time``, ``grad_norm`` iterations: ``train/loss``,
                                                              ``train/lr``,
                                                              ``train/batch_time`` (mean of
                                                              the last ``log_frequency``
                                                              steps), ``train/grad_norm``
                                                              (when clipping is on)
                                                              @ ``iteration``
    ``on_phase_end``    ``phase_name``, ``train_phase_idx``,  ``<phase>/loss_epoch`` (mean
                        ``phase_loss``,                       loss, when the phase had a
                        ``metrics``                           batch), ``<phase>/<metric>``
                                                              @ ``train_phase_idx``; flushes
                                                              and fsyncs the file
    ``on_end``,         --                                    closes the file
    ``on_exception``
    ==================  ====================================  =================================

    Writes nothing to the run state. ``float(loss)`` on logged iterations is the only
    per-step device sync. The scalars of one event and step go into one record of the
    event file, which TensorBoard reads as separate series by tag. Records are written
    in the hook's own thread (tensorboardX's ``EventsWriter``, a buffered file: no
    writer thread), so a write that fails (a full disk, a read-only folder) stops the run
    with one line naming the file (:class:`~hookbus.engine.errors.WriteFailure`, exit
    status 1) instead of a thread's traceback and lost curves; the phase end's flush
    comes before its checkpoint, so the phase runs again on resume.
    A resumed run adds a new event file to the same directory. tensorboardX names a file
    after the second it was opened; the hook adds the nanosecond, so that a run resumed
    within the same second adds its own file (instead of overwriting the previous one)
    and the files still sort in the order they were written.

    Example::

        TensorBoardHook(log_frequency=10).attach(trainer.engine)
        # tensorboard --logdir runs/default/tensorboard
    """

    priority = Priority.REPORT

    def __init__(self, log_frequency: int) -> None:
        if log_frequency < 1:
            raise ValueError(f"log_frequency must be >= 1, got {log_frequency}")
        super().__init__(name="tensorboard")
        self.log_frequency = log_frequency
        self._events: EventsWriter | None = None

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The TensorBoard hook at ``cfg.trainer.log_frequency``."""
        return cls(log_frequency=cfg.trainer.log_frequency)

    @rank_zero_only
    def on_start(self, engine: RunEngine) -> None:
        run_dir = Path(engine.state.run_dir)
        folder = inside_run_dir(run_dir, run_dir / TENSORBOARD_DIR)
        with writing(folder, RESUME_HINT):
            folder.mkdir(parents=True, exist_ok=True)
            self._events = EventsWriter(str(folder / "events"), f".{time.time_ns()}")

    def on_step(self, engine: RunEngine) -> None:
        if self._events is None or not self.every_n_train_iterations(engine, self.log_frequency):
            return
        state = engine.state
        scalars = {
            "train/loss": float(state.loss),  # type: ignore[arg-type]  # the step set it
            "train/lr": state.lr,
            "train/batch_time": recent_batch_time(state, self.log_frequency),
        }
        if state.grad_norm is not None:
            scalars["train/grad_norm"] = float(state.grad_norm)
        self._write(scalars, state.iteration)

    def on_phase_end(self, engine: RunEngine) -> None:
        if self._events is None:
            return
        state = engine.state
        scalars = phase_scalars(state)
        if scalars:
            self._write(scalars, state.train_phase_idx)
        with _writing(self._events):
            self._events.flush()

    def on_end(self, engine: RunEngine) -> None:
        events, self._events = self._events, None
        if events is not None:
            with _writing(events):
                events.close()

    def on_exception(self, engine: RunEngine) -> None:
        """Close the file; a failure to write it is not reported again (the run is
        already failing, with that error or another)."""
        events, self._events = self._events, None
        if events is not None:
            with contextlib.suppress(OSError):
                events.close()

    def _write(self, scalars: dict[str, float], step: int) -> None:
        """One event holding every scalar of ``scalars`` at ``step`` (a record costs its
        serialising and CRCs, so three scalars in one event cost about a third of three
        events)."""
        assert self._events is not None
        values = [value for tag, number in scalars.items() for value in scalar(tag, number).value]
        event = Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        with _writing(self._events):
            self._events.write_event(event)


def _writing(events: EventsWriter) -> contextlib.AbstractContextManager[None]:
    """:func:`hookbus.engine.errors.writing` naming ``events``' file."""
    return writing(events._file_name, RESUME_HINT)

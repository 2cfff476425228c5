"""The summary ``hookbus train`` prints at the end: what ran, how long, the results, the files."""

from __future__ import annotations

import time
from pathlib import Path

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME


class RunSummary(Hook):
    """Records where a run started and each phase kind's last results, for the summary.

    ====================  ===========================================  ====================
    event                 reads                                        writes
    ====================  ===========================================  ====================
    ``on_start``          ``iteration``                                -- (the start time
                                                                       and iteration)
    ``on_phase_start``    ``phase_idx``                                -- (the first phase
                                                                       this command runs)
    ``on_phase_end``      ``phase_name``, ``loss_sum``, ``batches``,   -- (the phase kind's
                          ``metrics``                                  last results)
    ====================  ===========================================  ====================

    Reading the phase's mean loss is one device sync per phase. Not a standard hook:
    the CLI attaches it to the trainer it runs.

    Example::

        summary = RunSummary().attach(trainer.engine)
        state = trainer.train()
        print("\\n".join(summary.lines(state)))
    """

    priority = Priority.NORMAL

    def __init__(self) -> None:
        super().__init__()
        self.started: float | None = None
        self.start_iteration = 0
        self.first_phase: int | None = None
        self.last: dict[str, str] = {}

    def on_start(self, engine: RunEngine) -> None:
        self.started = time.perf_counter()
        self.start_iteration = engine.state.iteration

    def on_phase_start(self, engine: RunEngine) -> None:
        if self.first_phase is None:
            self.first_phase = engine.state.phase_idx

    def on_phase_end(self, engine: RunEngine) -> None:
        state = engine.state
        parts = []
        if state.phase_loss is not None:
            parts.append(f"mean loss {state.phase_loss:.4f}")
        parts += [f"{name} {value:.4f}" for name, value in state.metrics.items()]
        self.last[state.phase_name] = ", ".join(parts) or "no steps"

    def lines(self, state: RunState) -> list[str]:
        """The summary of the finished run ``state``, one line per topic."""
        if self.started is None or self.first_phase is None:
            why = (
                f"the run was stopped early by {state.stopped_by} and counts as finished "
                "(trainer.resume_stopped=true goes on)"
                if state.stopped_by
                else f"{state.run_dir} holds the final checkpoint"
            )
            return [f"done: nothing left to train; {why}", _files_line(Path(state.run_dir))]
        total = len(state.phases)
        origin = f"resumed from {state.resumed_from}" if state.resumed_from else "fresh start"
        lines = [
            f"done: {total - self.first_phase} phases run ({self.first_phase + 1}-{total} of "
            f"{total}, {origin}); {state.iteration - self.start_iteration} train iterations "
            f"({state.iteration}/{state.max_iterations} in all); "
            f"wall time {_clock(time.perf_counter() - self.started)}",
        ]
        lines += [f"last {kind} phase: {text}" for kind, text in self.last.items()]
        if "stopped" in state.summary:
            lines.append(state.summary["stopped"])
        evaluation = state.summary.get("evaluation")
        if evaluation:
            trained, initial = evaluation["trained"], evaluation["random init"]
            lines.append(
                f"evaluation: kNN top-1 {trained['knn_top1']:.4f} "
                f"(random init {initial['knn_top1']:.4f}), probe top-1 "
                f"{trained['probe_top1']:.4f} (random init {initial['probe_top1']:.4f})"
            )
        lines.append(_files_line(Path(state.run_dir)))
        return lines


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _files_line(run_dir: Path) -> str:
    """The run directory's files: checkpoints counted, folders marked with a slash."""
    if not run_dir.is_dir():
        return f"run directory {run_dir} (empty)"
    names, checkpoints = [], 0
    for path in sorted(run_dir.iterdir()):
        if path.name.startswith(".") or path.name.endswith(".sha256"):
            continue
        if path.name.startswith("phase") and path.suffix == ".torch":
            checkpoints += 1
        elif path.name != POINTER_NAME:
            names.append(path.name + ("/" if path.is_dir() else ""))
    if (run_dir / POINTER_NAME).exists():
        newest = (run_dir / POINTER_NAME).resolve().name
        names.append(f"{POINTER_NAME} -> {newest} ({checkpoints} kept)")
    return f"files in {run_dir}: {', '.join(names) or 'none yet'}"

"""Run curves: the series a run's summary plot shows, kept as JSON and drawn as a PNG.

``curves.json`` in a run directory holds the series; ``curves.png`` is drawn from it.
:func:`build_figure` returns the matplotlib figure (Agg canvas, no pyplot, no display),
so tests can read the plotted data back from its lines.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.engine.bounded_files import loads_json_bounded, read_text_bounded
from hookbus.engine.checkpoint.checkpoint_io import write_output_file
from hookbus.engine.errors import DataError, UserError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CURVES_FILE = "curves.json"
PLOT_FILE = "curves.png"
METRICS_FILE = "metrics.json"
"""Written by the metrics-file hook; read here for runs without ``curves.json``."""

MAX_FILE_BYTES = 256 << 20
"""Largest ``curves.json`` or ``metrics.json`` read (256 MiB; a million logged steps
make about 50 MiB)."""

PHASE_KEYS = ("phase_idx", "phase", "train", "train_phase_idx", "iteration", "loss")
"""Keys of a phase record that are not meter values."""


@dataclass
class RunCurves:
    """The series of one run.

    ``steps``, ``loss`` and ``lr``: the train iterations at which the loss was logged,
    the step's loss and the learning rate there. ``phases``: one record per finished
    phase, as ``metrics.json`` writes it (``phase_idx``, ``phase``, ``train``,
    ``train_phase_idx``, ``iteration``, ``loss`` = the phase's mean loss, then meter
    values such as ``knn_top1``), ordered by ``phase_idx``.
    """

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)

    def add_step(self, iteration: int, loss: float, lr: float) -> None:
        """Record a logged train iteration."""
        self.steps.append(iteration)
        self.loss.append(loss)
        self.lr.append(lr)

    def add_phase(self, record: dict[str, Any]) -> None:
        """Record a finished phase; a phase recorded again (after a resume) replaces it."""
        kept = [row for row in self.phases if row["phase_idx"] != record["phase_idx"]]
        self.phases = sorted([*kept, dict(record)], key=lambda row: row["phase_idx"])

    def metric_names(self) -> list[str]:
        """The meter values found in the phase records, in first-seen order."""
        names: dict[str, None] = {}
        for row in self.phases:
            names.update((key, None) for key in row if key not in PHASE_KEYS)
        return list(names)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON files and checkpoints."""
        return {
            "steps": list(self.steps),
            "loss": list(self.loss),
            "lr": list(self.lr),
            "phases": [dict(row) for row in self.phases],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunCurves:
        """The curves :meth:`to_dict` returned."""
        return cls(
            steps=list(data["steps"]),
            loss=list(data["loss"]),
            lr=list(data["lr"]),
            phases=[dict(row) for row in data["phases"]],
        )


def read_metrics_rows(path: Path) -> list[dict[str, Any]]:
    """The phase records of a ``metrics.json`` file, the last line of each ``phase_idx``.

    Should a phase appear twice (files joined by hand, say), the later line wins.
    Blank lines and a truncated last line (a crash mid-write) are skipped. The file is
    read within bounds (a regular file of at most :data:`MAX_FILE_BYTES`, lines nested
    at most :data:`~hookbus.engine.bounded_files.MAX_JSON_DEPTH` deep): else DataError.
    """
    rows: dict[int, dict[str, Any]] = {}
    for line in read_text_bounded(
        path, "metrics file", MAX_FILE_BYTES, error=DataError
    ).splitlines():
        try:
            row = loads_json_bounded(line, f"a line of {path}", error=DataError)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and type(row.get("phase_idx")) is int:
            rows[row["phase_idx"]] = row
    return [rows[key] for key in sorted(rows)]


def read_curves(run_dir: Path) -> RunCurves:
    """The curves of a run directory: ``curves.json``, or else the phases of ``metrics.json``.

    Raises :class:`hookbus.engine.errors.UserError` when the directory has neither file,
    and :class:`hookbus.engine.errors.DataError` for one that cannot be read or parsed,
    or is not a regular file within bounds (a FIFO, a link to a device, over
    :data:`MAX_FILE_BYTES`, nested too deep); lines of ``metrics.json`` that are not
    phase records are skipped.
    """
    run_dir = Path(run_dir)
    curves_path, metrics_path = run_dir / CURVES_FILE, run_dir / METRICS_FILE
    if os.path.lexists(curves_path):
        text = read_text_bounded(curves_path, "curves file", MAX_FILE_BYTES, error=DataError)
        try:
            return RunCurves.from_dict(loads_json_bounded(text, str(curves_path), error=DataError))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DataError(
                f"{curves_path} is not a curves file ({type(exc).__name__}: "
                f"{str(exc)[:80]}); delete it to redraw from {METRICS_FILE}"
            ) from None
    if os.path.lexists(metrics_path):
        return RunCurves(phases=read_metrics_rows(metrics_path))
    raise UserError(f"{run_dir}: no {CURVES_FILE} or {METRICS_FILE}; is it a run directory?")


def build_figure(curves: RunCurves, title: str = "") -> Figure:
    """Three panels against the train iteration: loss, learning rate, meter values.

    Each line has a label (``train loss``, ``train mean loss``, ``test mean loss``,
    ``lr``, ``<phase> <meter>``), so its data can be found with ``ax.get_lines()``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    loss_ax, lr_ax, meter_ax = figure.subplots(1, 3)
    if title:
        figure.suptitle(title)

    loss_ax.set_title("loss")
    if curves.steps:
        loss_ax.plot(curves.steps, curves.loss, label="train loss", linewidth=1, alpha=0.6)
    for phase in ("train", "test"):
        rows = [r for r in curves.phases if r["phase"] == phase and r["loss"] is not None]
        if rows:
            xs, ys = [r["iteration"] for r in rows], [r["loss"] for r in rows]
            loss_ax.plot(xs, ys, marker="o", markersize=3, label=f"{phase} mean loss")

    lr_ax.set_title("learning rate")
    if curves.steps:
        lr_ax.plot(curves.steps, curves.lr, label="lr")

    meter_ax.set_title("meters")
    for name in curves.metric_names():
        for phase in ("train", "test"):
            rows = [r for r in curves.phases if r["phase"] == phase and name in r]
            if rows:
                xs, ys = [r["iteration"] for r in rows], [r[name] for r in rows]
                meter_ax.plot(xs, ys, marker="o", markersize=3, label=f"{phase} {name}")

    for ax in (loss_ax, lr_ax, meter_ax):
        ax.set_xlabel("train iteration")
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return figure


def write_curves(curves: RunCurves, run_dir: Path) -> Path:
    """Write ``run_dir/curves.json`` through a temporary file and a rename; returns its path.

    A failed write is :class:`hookbus.engine.errors.OutputWriteError` (one line), the
    file as it was."""
    path = Path(run_dir) / CURVES_FILE
    write_output_file(path, json.dumps(curves.to_dict()).encode("utf-8"))
    return path


def write_plot(curves: RunCurves, run_dir: Path, title: str = "") -> Path:
    """Write ``curves.json`` and ``curves.png`` into ``run_dir``; returns the PNG's path."""
    write_curves(curves, run_dir)
    return save_png(build_figure(curves, title), Path(run_dir) / PLOT_FILE)


def save_png(figure: Figure, path: Path) -> Path:
    """Render ``figure`` to ``path`` as a PNG, through a temporary file and a rename; a
    failed write is :class:`hookbus.engine.errors.OutputWriteError`, the file as it was."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    write_output_file(path, buffer.getvalue())
    return path

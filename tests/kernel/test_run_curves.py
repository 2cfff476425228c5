"""Run curves: their JSON form, reading a run directory, and the figure's plotted data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookbus import UserError
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    PLOT_FILE,
    RunCurves,
    build_figure,
    read_curves,
    read_metrics_rows,
    write_plot,
)


def sample_curves() -> RunCurves:
    curves = RunCurves()
    for iteration in (2, 4, 6):
        curves.add_step(iteration, 10.0 / iteration, 0.01 * iteration)
    curves.add_phase({"phase_idx": 0, "phase": "train", "iteration": 3, "loss": 4.0})
    curves.add_phase({"phase_idx": 1, "phase": "test", "iteration": 3, "loss": 3.0, "knn": 0.5})
    curves.add_phase({"phase_idx": 2, "phase": "train", "iteration": 6, "loss": 2.0})
    curves.add_phase({"phase_idx": 3, "phase": "test", "iteration": 6, "loss": 1.0, "knn": 0.8})
    return curves


def lines_by_label(figure) -> dict[str, list[list[float]]]:
    return {
        line.get_label(): line.get_xydata().tolist()
        for ax in figure.axes
        for line in ax.get_lines()
    }


def test_a_phase_recorded_again_replaces_the_old_record() -> None:
    curves = RunCurves()
    curves.add_phase({"phase_idx": 1, "phase": "test", "loss": 1.0})
    curves.add_phase({"phase_idx": 0, "phase": "train", "loss": 3.0})
    curves.add_phase({"phase_idx": 1, "phase": "test", "loss": 0.5})
    assert [(row["phase_idx"], row["loss"]) for row in curves.phases] == [(0, 3.0), (1, 0.5)]


def test_metric_names_are_the_keys_beyond_the_phase_fields() -> None:
    assert sample_curves().metric_names() == ["knn"]


def test_dict_round_trip() -> None:
    curves = sample_curves()
    assert RunCurves.from_dict(json.loads(json.dumps(curves.to_dict()))) == curves


def test_figure_plots_each_series_against_the_train_iteration() -> None:
    figure = build_figure(sample_curves(), "run")
    assert [ax.get_title() for ax in figure.axes] == ["loss", "learning rate", "meters"]
    assert lines_by_label(figure) == {
        "train loss": [[2, 5.0], [4, 2.5], [6, 10 / 6]],
        "train mean loss": [[3, 4.0], [6, 2.0]],
        "test mean loss": [[3, 3.0], [6, 1.0]],
        "lr": [[2, 0.02], [4, 0.04], [6, pytest.approx(0.06)]],
        "test knn": [[3, 0.5], [6, 0.8]],
    }


def test_empty_curves_still_make_a_figure() -> None:
    figure = build_figure(RunCurves())
    assert lines_by_label(figure) == {}
    assert [ax.texts[0].get_text() for ax in figure.axes] == ["no data"] * 3


@pytest.mark.slow
def test_write_plot_leaves_json_and_png(tmp_path: Path) -> None:
    path = write_plot(sample_curves(), tmp_path, "run")
    assert path == tmp_path / PLOT_FILE
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read_curves(tmp_path) == sample_curves()
    assert sorted(p.name for p in tmp_path.iterdir()) == [CURVES_FILE, PLOT_FILE]


def test_metrics_rows_keep_the_last_line_of_each_phase_and_skip_a_torn_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(
        '{"phase_idx": 0, "loss": 2.0}\n{"phase_idx": 0, "loss": 1.5}\n\n{"phase_idx": 1, "lo'
    )
    assert read_metrics_rows(path) == [{"phase_idx": 0, "loss": 1.5}]


def test_a_run_without_curves_json_is_read_from_metrics_json(tmp_path: Path) -> None:
    row = {"phase_idx": 0, "phase": "test", "iteration": 5, "loss": 1.0, "knn_top1": 0.9}
    (tmp_path / "metrics.json").write_text(json.dumps(row) + "\n")
    assert read_curves(tmp_path) == RunCurves(phases=[row])


def test_a_folder_that_is_no_run_directory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no curves.json or metrics.json"):
        read_curves(tmp_path)

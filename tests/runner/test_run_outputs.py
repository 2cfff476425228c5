"""What a demo-recipe run leaves behind: the curves PNG and its data, TensorBoard events
that TensorBoard itself reads, the start line and the final summary; and ``hookbus plot``."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hookbus.cli import main
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    PLOT_FILE,
    build_figure,
    read_curves,
    read_metrics_rows,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
SMALL = [
    "trainer.test_every_num_epochs=1",
    "trainer.log_frequency=1",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
]
STEPS_PER_EPOCH = 5  # 1297 train images, batch 256, last partial batch dropped


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo recipe, made small: one epoch, then resumed and extended to two.

    Returns the run directory and what the second command printed.
    """
    run_dir = tmp_path_factory.mktemp("demo") / "run"
    args = ["train", str(RECIPE), f"checkpoint.dir={run_dir}", *SMALL]
    assert main([*args, "optimizer.num_epochs=1", "-q"]) == 0
    extended = [*args, "optimizer.num_epochs=2", "checkpoint.change_finished=true", "-q"]
    return run_dir, printed_by(extended)


def printed_by(argv: list[str]) -> str:
    """What ``hookbus ARGV`` prints on stdout; it must exit 0 (usable in module fixtures)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_the_run_leaves_a_png_of_its_curves(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    with Image.open(run_dir / PLOT_FILE) as image:
        image.verify()
        assert image.format == "PNG"
        assert image.size[0] > 2 * image.size[1]


def test_curves_cover_every_logged_iteration_across_the_resume(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    curves = json.loads((run_dir / CURVES_FILE).read_text())
    assert curves["steps"] == list(range(1, 2 * STEPS_PER_EPOCH + 1))
    assert all(loss > 0 for loss in curves["loss"])
    assert curves["lr"] == sorted(curves["lr"])  # warm-up: the rate rises


def test_curves_phases_are_the_rows_of_metrics_json(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    phases = json.loads((run_dir / CURVES_FILE).read_text())["phases"]
    assert phases == read_metrics_rows(run_dir / "metrics.json")
    assert [(row["phase"], row["iteration"]) for row in phases] == [
        ("train", 5),
        ("test", 5),
        ("train", 10),
        ("test", 10),
    ]
    assert all(0 <= row["knn_top1"] <= 1 for row in phases if row["phase"] == "test")


def test_the_figure_plots_the_run_curves(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    curves = read_curves(run_dir)
    figure = build_figure(curves)
    lines = {line.get_label(): line for ax in figure.axes for line in ax.get_lines()}
    assert list(lines["train loss"].get_ydata()) == curves.loss
    assert list(lines["lr"].get_xdata()) == curves.steps
    knn = [row["knn_top1"] for row in curves.phases if row["phase"] == "test"]
    assert list(lines["test knn_top1"].get_ydata()) == knn


def test_tensorboard_reads_the_event_files_of_both_invocations(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert {"train/loss", "train/lr", "train/loss_epoch", "test/knn_top1"} <= set(
        events.Tags()["scalars"]
    )
    curves = read_curves(run_dir)
    losses = events.Scalars("train/loss")
    assert [event.step for event in losses] == curves.steps
    assert [event.value for event in losses] == pytest.approx(curves.loss, rel=1e-6)
    assert [event.step for event in events.Scalars("test/knn_top1")] == [0, 1]


def test_the_log_starts_with_the_run_directory_origin_and_device(run: tuple[Path, str]) -> None:
    run_dir, _ = run
    log = (run_dir / "log.txt").read_text().splitlines()
    starts = [line for line in log if f" INFO run {run_dir} (" in line]
    assert f"run {run_dir} (fresh start) | device cpu" in starts[0]
    assert re.search(rf"run {run_dir} \(resumed from .*phase00001_batch\d+\.torch\)", starts[1])


def test_the_final_summary_names_phases_iterations_results_and_files(
    run: tuple[Path, str],
) -> None:
    _, out = run
    lines = out.splitlines()
    assert lines[0].startswith("done: 2 phases run (3-4 of 4, resumed from ")
    assert "5 train iterations (10/10 in all); wall time 0:" in lines[0]
    assert lines[1].startswith("last train phase: mean loss ")
    assert re.fullmatch(r"last test phase: mean loss \d\.\d{4}, knn_top1 \d\.\d{4}", lines[2])
    assert lines[3].startswith("files in ")
    for name in ("config.yaml", "curves.png", "metrics.json", "log.txt", "tensorboard/"):
        assert name in lines[3]


def test_plot_command_redraws_from_the_run_directory(run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, _ = run
    output = tmp_path / "again.png"
    assert printed_by(["plot", str(run_dir), "-o", str(output)]) == f"wrote {output}\n"
    with Image.open(output) as image:
        assert image.format == "PNG"


def test_plot_command_on_a_folder_without_a_run_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(tmp_path)]) == 2
    assert "no curves.json or metrics.json" in capsys.readouterr().err

"""``hookbus plot`` reads a run's JSON files within bounds and never reports a plot it did
not write: a bomb, a FIFO, a device or a directory in their place is one line, exit 2; a
write that fails is one line, exit 1; the output never replaces a file a run keeps."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import hookbus.commands as commands
from hookbus.cli import main
from hookbus.engine.bounded_files import MAX_JSON_DEPTH
from hookbus.engine.checkpoint.run_curves import (
    CURVES_FILE,
    MAX_FILE_BYTES,
    PLOT_FILE,
    RunCurves,
    read_curves,
)
from tests.disk_mounts import fill, remount_read_only, small_tmpfs
from tests.runner.test_export_safety import within

PNG = b"\x89PNG\r\n\x1a\n"
CURVES = RunCurves(
    steps=[1, 2],
    loss=[2.0, 1.0],
    lr=[0.1, 0.1],
    phases=[{"phase_idx": 0, "phase": "train", "train": True, "iteration": 2, "loss": 1.5}],
)


def make_run(folder: Path) -> Path:
    """A run directory as a finished run leaves it for the plot: config, metrics, curves."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("trainer: {}\n")
    (folder / "metrics.json").write_text(json.dumps(CURVES.phases[0]) + "\n")
    (folder / CURVES_FILE).write_text(json.dumps(CURVES.to_dict()))
    return folder


def plot(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``hookbus plot args``: the exit status, stdout and stderr."""
    with within(20):
        status = main(["plot", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out.strip(), captured.err.strip()


def assert_one_line(err: str, *texts: str) -> None:
    assert len(err.splitlines()) == 1 and err.startswith("hookbus plot: error: ")
    for text in texts:
        assert text in err


def test_a_good_run_is_plotted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "run")
    status, out, _ = plot(capsys, run)
    assert (status, out) == (0, f"wrote {run / PLOT_FILE}")
    assert (run / PLOT_FILE).read_bytes()[:8] == PNG


def test_deeply_nested_curves_are_one_line_naming_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).write_text("[" * 100_000 + "]" * 100_000)
    status, _, err = plot(capsys, run)
    assert status == 2
    assert_one_line(err, str(run / CURVES_FILE), f"deeper than {MAX_JSON_DEPTH} levels")
    assert not (run / PLOT_FILE).exists()


def test_a_deeply_nested_metrics_line_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).unlink()
    (run / "metrics.json").write_text(
        '{"phase_idx": 0, "x": ' + "[" * 50_000 + "]" * 50_000 + "}\n"
    )
    status, _, err = plot(capsys, run)
    assert status == 2
    assert_one_line(err, str(run / "metrics.json"), f"deeper than {MAX_JSON_DEPTH} levels")


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    row = dict(CURVES.phases[0], phase="[[[[" * 20 + '"{{')
    (run / CURVES_FILE).write_text(json.dumps(dict(CURVES.to_dict(), phases=[row])))
    assert read_curves(run).phases == [row]


def test_a_run_without_curves_json_is_drawn_from_its_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    drawn = plot(capsys, run)
    (run / CURVES_FILE).unlink()
    (run / PLOT_FILE).rename(tmp_path / "from_curves.png")
    assert plot(capsys, run) == drawn
    (run / "metrics.json").unlink()
    status, out, err = plot(capsys, run)
    assert (status, out) == (2, "")
    assert_one_line(err, f"{run}: no curves.json or metrics.json; is it a run directory?")


NOTHING: dict[str, tuple[Callable[[Path], object], str]] = {
    "empty": (lambda path: path.write_bytes(b""), "is not a curves file"),
    "a symbolic link loop": (
        lambda path: path.symlink_to(path),
        "is a symbolic link loop: it leads nowhere",
    ),
    "a broken symbolic link": (
        lambda path: path.symlink_to(path.with_name("gone.json")),
        "curves file not found: ",
    ),
}


@pytest.mark.parametrize("kind", list(NOTHING))
def test_curves_json_that_holds_nothing_is_one_line_naming_it(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, said = NOTHING[kind]
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).unlink()
    make(run / CURVES_FILE)
    status, out, err = plot(capsys, run)
    assert (status, out) == (2, "")
    assert_one_line(err, str(run / CURVES_FILE), said)
    assert not (run / PLOT_FILE).exists()


def test_curves_linked_to_dev_zero_are_refused_not_plotted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).unlink()
    (run / CURVES_FILE).symlink_to("/dev/zero")
    status, out, err = plot(capsys, run)
    assert (status, out) == (2, "")
    assert_one_line(err, str(run / CURVES_FILE), "character device")
    assert not (run / PLOT_FILE).exists()


def test_curves_that_are_a_fifo_are_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).unlink()
    os.mkfifo(run / CURVES_FILE)
    status, _, err = plot(capsys, run)
    assert status == 2
    assert_one_line(err, str(run / CURVES_FILE), "FIFO")


@pytest.mark.parametrize("name", [CURVES_FILE, "metrics.json"])
def test_a_sparse_file_over_the_limit_is_refused_naming_it(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    if name != CURVES_FILE:
        (run / CURVES_FILE).unlink()
    os.truncate(run / name, MAX_FILE_BYTES + 1)
    status, _, err = plot(capsys, run)
    assert status == 2
    assert_one_line(err, str(run / name), "over hookbus's limit of 256.0 MiB")


def test_metrics_that_are_a_directory_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / CURVES_FILE).unlink()
    (run / "metrics.json").unlink()
    (run / "metrics.json").mkdir()
    status, _, err = plot(capsys, run)
    assert status == 2
    assert_one_line(err, str(run / "metrics.json"), "is a directory")


def test_curves_png_that_is_a_directory_is_one_line_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    (run / PLOT_FILE).mkdir()
    (run / PLOT_FILE / "keep").write_text("mine")
    status, out, err = plot(capsys, run)
    assert (status, out) == (2, "")
    assert_one_line(err, f"{run / PLOT_FILE} is a directory")
    assert (run / PLOT_FILE / "keep").read_text() == "mine"


@pytest.mark.parametrize("name", ["checkpoint.torch", "config.yaml", CURVES_FILE, "log.txt"])
def test_an_output_over_a_file_the_run_keeps_is_refused(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    status, _, err = plot(capsys, run, "-o", run / name)
    assert status == 2
    assert_one_line(err, str(run / name))
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_an_output_into_another_run_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, other = make_run(tmp_path / "run"), make_run(tmp_path / "other")
    status, _, err = plot(capsys, run, "-o", other / "metrics.json")
    assert status == 2
    assert_one_line(err, str(other / "metrics.json"), str(other))
    assert (other / "metrics.json").read_text() == json.dumps(CURVES.phases[0]) + "\n"


def test_an_output_outside_run_directories_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    status, out, _ = plot(capsys, run, "-o", tmp_path / "figures" / "run.png")
    assert (status, out) == (0, f"wrote {tmp_path / 'figures' / 'run.png'}")
    assert (tmp_path / "figures" / "run.png").read_bytes()[:8] == PNG


@pytest.fixture
def small_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command draws a one-inch empty figure (the write is under test, not the panels)."""

    def draw(curves: RunCurves, title: str) -> Figure:
        figure = Figure(figsize=(1, 1))
        FigureCanvasAgg(figure)
        return figure

    monkeypatch.setattr(commands, "build_figure", draw)


@pytest.mark.usefixtures("small_figure")
def test_a_read_only_run_directory_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_tmpfs(tmp_path / "run") as run:
        make_run(run)
        remount_read_only(run)
        status, out, err = plot(capsys, run)
        assert (status, out) == (1, "")
        assert err == (
            f"hookbus plot: error: cannot write {run / PLOT_FILE}: Read-only file system; "
            "it is left as it was"
        )
        assert sorted(p.name for p in run.iterdir()) == ["config.yaml", CURVES_FILE, "metrics.json"]


@pytest.mark.usefixtures("small_figure")
def test_a_full_disk_is_one_line_exit_1_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    with small_tmpfs(tmp_path / "small", size_kib=16) as small:
        filler = fill(small)
        status, out, err = plot(capsys, run, "-o", small / "curves.png")
        assert (status, out) == (1, "")
        assert_one_line(err, f"cannot write {small / 'curves.png'}", "No space left on device")
        assert list(small.iterdir()) == [filler]

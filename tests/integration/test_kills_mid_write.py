"""A ``hookbus export``, ``eval`` or ``plot`` killed with SIGKILL in the middle of writing its
file: nothing named like the output is left (the old file, if any, stays as it was), and a
rerun of the same command writes the file a clean run writes, leaving no temporary file
behind (the killed writer's is removed). The clean run and the rerun go through the command
line's entry point in the test's process; the killed command is a process of its own.

The kill is a real signal to a real process, sent while the file's bytes are in its
temporary file and not yet renamed into place (:mod:`tests.pause_in_write` holds the
command there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hookbus.cli import main
from tests.eval_runs import photo_settings, write_run
from tests.kill_harness import ROOT
from tests.pause_in_write import PAUSED
from tests.photos import make_photo_folder
from tests.runner.test_plot_safety import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory on 6 + 6 real photographs (32 px) with one checkpoint, and the
    curves a finished run leaves for the plot."""
    root = tmp_path_factory.mktemp("killed")
    folder = make_photo_folder(root / "photos", per_class=3, size=32)
    write_run(root / "run", photo_settings(folder))
    return make_run(root / "run")


def hookbus_here(*arguments: str | Path) -> int:
    """``hookbus arguments`` through the command line's entry point in this process (no
    second interpreter's start: only the killed command must be a process of its own);
    its exit status."""
    return main([str(argument) for argument in arguments])


def killed_mid_write(name: str, *arguments: str | Path) -> Path:
    """Run ``hookbus arguments`` until it writes the bytes of its file ``name``, SIGKILL
    it there; returns the temporary file it was writing (still there, with bytes)."""
    command = [sys.executable, "-m", "tests.pause_in_write", name, *map(str, arguments)]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if line.startswith(PAUSED):
                break
        else:
            pytest.fail(f"hookbus {arguments[0]} ended before writing {name}")
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    finally:
        process.kill()
        process.wait()
    temporary = Path(line[len(PAUSED) :].strip())
    assert temporary.stat().st_size > 0
    return temporary


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(entry for entry in os.listdir(folder) if entry.startswith(f".{name}.tmp-"))


def export(run: Path, out: Path) -> tuple[str, ...]:
    return ("export", run, out / "backbone.pth")


def evaluate(run: Path, out: Path) -> tuple[str, ...]:
    return ("eval", run, "--out", out, "-q")


def plot(run: Path, out: Path) -> tuple[str, ...]:
    return ("plot", run, "-o", out / "curves.png")


def eval_results(path: Path) -> dict[str, object]:
    """eval.json without whether its features came from the cache (a rerun's do) and the
    seconds each part took."""
    results = json.loads(path.read_text())
    del results["cached_features"], results["seconds"]
    return results


COMMANDS: dict[str, tuple[Callable[[Path, Path], tuple[str, ...]], str, Callable]] = {
    "export": (export, "backbone.pth", Path.read_bytes),
    "eval": (evaluate, "eval.json", eval_results),
    "plot": (plot, "curves.png", Path.read_bytes),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_kill_mid_write_leaves_no_output_and_a_rerun_equals_a_clean_run(
    command: str, run: Path, tmp_path: Path
) -> None:
    arguments, name, content = COMMANDS[command]
    clean, out = tmp_path / "clean", tmp_path / "out"
    assert hookbus_here(*arguments(run, clean)) == 0
    temporary = killed_mid_write(name, *arguments(run, out))
    assert temporary.parent == out and not (out / name).exists()
    assert hookbus_here(*arguments(run, out)) == 0
    assert content(out / name) == content(clean / name)
    assert leftovers(out, name) == []

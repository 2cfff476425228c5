"""The work a run owes after its last step (the evaluation report, the summary plot) is
resumable: a run stopped inside it is not finished, and a rerun does the work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer, default_hooks
from hookbus.engine.checkpoint.end_of_run import end_work_owed
from hookbus.engine.checkpoint.run_files import PENDING_NAME
from hookbus.engine.errors import PREEMPTED_EXIT_STATUS, WriteFailure
from tests.conftest import tiny_config
from tests.disk_mounts import bind_read_only, fill, small_tmpfs, unbind
from tests.kill_harness import ROOT, command, run_here, write_recipe

REPORT = {"evaluation_report": {"enabled": True, "labels_per_class": 2, "draws": 2}}
"""The end-of-run work of the process-level test: evaluation.json (the summary plot is
left to the in-process test: matplotlib's import and a render take about 1.5 s a run)."""


class FailOnceAtEnd(Hook):
    """Raises in ``on_end``, before the report hooks (a full disk, say), the first time."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def on_end(self, engine: Engine) -> None:
        if not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")


def test_a_run_whose_end_work_failed_is_not_finished_and_a_rerun_does_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = tiny_config(tmp_path / "run", hooks={"summary_plot": {"enabled": True}})
    run_dir = Path(cfg.checkpoint.dir)
    with pytest.raises(OSError, match="No space left"):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), FailOnceAtEnd()]).train()
    assert end_work_owed(run_dir) and not (run_dir / "curves.png").exists()
    assert "summary_plot" in (run_dir / PENDING_NAME).read_text()

    with caplog.at_level("INFO", logger="hookbus"):
        SSLTrainer(cfg).train()
    assert "before its end-of-run work (" in caplog.text
    assert ") finished: doing it now" in caplog.text
    assert (run_dir / "curves.png").stat().st_size > 0
    assert not end_work_owed(run_dir)

    caplog.clear()
    with caplog.at_level("INFO", logger="hookbus"):
        SSLTrainer(cfg).train()
    assert "training already complete" in caplog.text


def test_a_finished_run_leaves_no_record_and_one_in_progress_has_it(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run")
    seen: list[bool] = []

    class Look(Hook):
        def on_step(self, engine: Engine) -> None:
            seen.append(end_work_owed(engine.state.run_dir))

    SSLTrainer(cfg, hooks=[*default_hooks(cfg), Look()]).train()
    assert seen and all(seen)
    assert not end_work_owed(Path(cfg.checkpoint.dir))


def test_a_run_directory_of_an_older_hookbus_counts_as_finished(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No record at all (written before hookbus kept one): complete, nothing redone."""
    cfg = tiny_config(tmp_path / "run")
    SSLTrainer(cfg).train()
    with caplog.at_level("INFO", logger="hookbus"):
        SSLTrainer(cfg).train()
    assert "training already complete" in caplog.text


def wait_for(path: Path, text: str, process: subprocess.Popen[str], seconds: float) -> None:
    started = time.monotonic()
    while not (path.is_file() and text in path.read_text()):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < started + seconds, f"no {text!r} in {path} after {seconds} s"
        time.sleep(0.02)


@pytest.mark.slow
def test_two_sigterms_inside_the_end_work_leave_it_owed_and_a_rerun_equals_a_clean_run(
    tmp_path: Path,
) -> None:
    """Real signals to a real ``hookbus train``: the first SIGTERM arrives once the run
    logs that its end-of-run work began, the second 0.3 s later, while a hook's
    ``on_end`` (before the report hook) still sleeps. The rerun, without that hook,
    writes the evaluation report a run never stopped writes."""
    sections = {
        "hooks": REPORT,
        "trainer": {"imports": ["tests.tiny_data", "tests.failure_hooks"]},
    }
    recipe = write_recipe(tmp_path / "recipe.yaml", epochs=2, sections=sections)
    clean = tmp_path / "clean"
    run_here(recipe, clean)  # the same command, in this process

    run = tmp_path / "run"
    slow = "hooks.extra=[{name: slow_end, params: {seconds: 60}}]"
    process = subprocess.Popen(
        [*command(recipe, run)[:-1], slow, "-q"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(run / "log.txt", "end-of-run work: ", process, 120)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == PREEMPTED_EXIT_STATUS, err
    assert err.splitlines()[-1].startswith("hookbus train: preempted: second SIGTERM")
    assert "Traceback" not in err
    assert not (run / "evaluation.json").exists()
    assert end_work_owed(run)

    # The rerun leaves out the slow hook: a change to a finished run's config, asked for.
    *head, last = command(recipe, run)
    again = [*head, "checkpoint.change_finished=true", last]
    rerun = subprocess.run(again, cwd=ROOT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert not end_work_owed(run)
    assert (run / "evaluation.json").read_text() == (clean / "evaluation.json").read_text()
    assert sorted(os.listdir(run)) == sorted(os.listdir(clean))


class FillAtEnd(Hook):
    """Fills the run's tmpfs to the last byte in ``on_end``, before the report hooks."""

    def __init__(self, mount: Path) -> None:
        super().__init__()
        self.mount = mount

    def on_end(self, engine: Engine) -> None:
        fill(self.mount)


def test_a_disk_full_at_the_end_is_one_line_and_the_work_stays_owed(tmp_path: Path) -> None:
    """On a real 8 MiB tmpfs, filled once the final checkpoint is written: a WriteFailure
    naming the file; with space again, a rerun writes the report."""
    with small_tmpfs(tmp_path / "disk", size_kib=8192) as disk:
        hooks = {**REPORT, "summary_plot": {"enabled": False}}
        cfg = tiny_config(disk / "run", hooks=hooks)
        with pytest.raises(WriteFailure, match=r"evaluation.json: No space left on device"):
            SSLTrainer(cfg, hooks=[*default_hooks(cfg), FillAtEnd(disk)]).train()
        run_dir = disk / "run"
        assert end_work_owed(run_dir) and not (run_dir / "evaluation.json").exists()
        (disk / "filler").unlink()
        SSLTrainer(cfg).train()
        assert json.loads((run_dir / "evaluation.json").read_text()).keys() == {
            "random init",
            "trained",
        }
        assert not end_work_owed(run_dir)


class ReadOnlyAtEnd(Hook):
    """Turns the run directory read-only in ``on_end``, before the report hooks."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir

    def on_end(self, engine: Engine) -> None:
        bind_read_only(self.run_dir)


def test_a_run_directory_turned_read_only_at_the_end_is_one_line_and_the_work_stays_owed(
    tmp_path: Path,
) -> None:
    """A real read-only mount (a read-only bind mount of the run directory over itself,
    made once the final checkpoint is written; its open log stays writable): a
    WriteFailure naming the file; writable again, a rerun writes the report."""
    hooks = {**REPORT, "summary_plot": {"enabled": False}}
    cfg = tiny_config(tmp_path / "run", hooks=hooks)
    run_dir = Path(cfg.checkpoint.dir)
    try:
        with pytest.raises(WriteFailure, match=r"evaluation.json: Read-only file system"):
            SSLTrainer(cfg, hooks=[*default_hooks(cfg), ReadOnlyAtEnd(run_dir)]).train()
        assert end_work_owed(run_dir) and not (run_dir / "evaluation.json").exists()
    finally:
        unbind(run_dir)
    SSLTrainer(cfg).train()
    assert json.loads((run_dir / "evaluation.json").read_text()).keys() == {
        "random init",
        "trained",
    }
    assert not end_work_owed(run_dir)

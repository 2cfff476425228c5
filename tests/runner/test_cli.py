"""The hookbus command line: exit statuses, messages, and what a run leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.cli import main
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
FAST = [
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=1",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
]


@pytest.mark.slow
def test_validate_accepts_the_shipped_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(RECIPE)]) == 0
    assert "valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("optimizer.lrr=1", "unknown key 'optimizer.lrr'"),
        ("optimizer.lr=-1", "optimizer.lr: Input should be greater than 0"),
        ("trainer.train_step_name=nope", "trainer.train_step_name: unknown train step 'nope'"),
        ("loss.name=nope", "loss.name: unknown loss 'nope'"),
        ("trainer.imports=[no_such_module_xyz]", "cannot import 'no_such_module_xyz'"),
        ("hooks.extra=[{name: nope}]", "hooks.extra[0].name: unknown hook 'nope'"),
        ("model.backbone.in_channels=3", "(small_cnn) cannot encode the digits images (1x16x16"),
        ("model.head.dims=[64,32]", "model: model.head.dims[0]"),
    ],
)
def test_user_errors_exit_2_with_one_clear_line(
    override: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(RECIPE), override]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_config_writes_nothing_into_an_existing_run_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("x")
    code = main(["train", str(RECIPE), f"checkpoint.dir={run}", "optimizer.num_epochs=zero"])
    assert code == 2
    assert sorted(os.listdir(run)) == ["keep.txt"]


def test_missing_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(tmp_path / "nope.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


@pytest.mark.slow
def test_train_writes_the_run_directory_then_resumes_one_more_epoch(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", str(RECIPE), f"checkpoint.dir={run}", *FAST, "-q"]) == 0
    names = set(os.listdir(run))
    assert {POINTER_NAME, "log.txt", "metrics.json", "config.yaml", "tensorboard"} <= names
    assert any(name.startswith("phase") and name.endswith(".torch") for name in names)
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(run / "tensorboard"))
    first = [json.loads(line) for line in (run / "metrics.json").read_text().splitlines()]
    assert [row["phase"] for row in first] == ["train", "test"]
    assert 0.0 <= first[1]["knn_top1"] <= 1.0

    more = [arg for arg in FAST if not arg.startswith("optimizer.num_epochs")]
    extend = ["optimizer.num_epochs=2", "checkpoint.change_finished=true"]  # asked for
    assert main(["train", str(RECIPE), f"checkpoint.dir={run}", *more, *extend]) == 0
    rows = [json.loads(line) for line in (run / "metrics.json").read_text().splitlines()]
    assert [row["train_phase_idx"] for row in rows] == [0, 0, 1, 1]
    checkpoint = load_checkpoint(run / POINTER_NAME)
    assert checkpoint["train_phase_idx"] == 1
    assert checkpoint["iteration"] == 10  # 5 steps per epoch, 2 epochs
    assert "resum" in (run / "log.txt").read_text()


@pytest.mark.slow
def test_finished_run_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    args = ["train", str(RECIPE), f"checkpoint.dir={run}", *FAST]
    assert main([*args, "-q"]) == 0
    assert main(args) == 0
    assert "training already complete" in capsys.readouterr().out


@pytest.mark.slow
def test_console_script_prints_help_with_examples() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "hookbus train configs/simclr_digits.yaml" in result.stdout


def test_hooks_command_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hooks", str(RECIPE)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("on_start")
    assert "meter_sync (FIRST)" in out

"""hookbus export RUN_DIR: a run directory exports its newest checkpoint, as embed and
eval read it; a directory without one is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hookbus import SSLTrainer
from hookbus.cli import main
from tests.conftest import tiny_config


def test_a_run_directory_exports_its_newest_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    SSLTrainer(tiny_config(run, optimizer={"num_epochs": 1})).train()
    assert main(["export", str(run), str(tmp_path / "from_dir.pth")]) == 0
    assert main(["export", str(run / "checkpoint.torch"), str(tmp_path / "from_file.pth")]) == 0
    assert capsys.readouterr().out.count("tensors of the backbone") == 2
    from_dir = torch.load(tmp_path / "from_dir.pth", weights_only=True)
    from_file = torch.load(tmp_path / "from_file.pth", weights_only=True)
    assert from_dir.keys() == from_file.keys()
    assert all(torch.equal(from_dir[key], from_file[key]) for key in from_dir)


def test_a_directory_without_a_checkpoint_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(tmp_path), str(tmp_path / "out.pth")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"hookbus export: error: no checkpoint in {tmp_path} (a run directory holds "
        "phase*.torch; give a run directory or a checkpoint)\n"
    )

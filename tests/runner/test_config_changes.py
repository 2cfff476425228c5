"""Config changes on resume: safe ones are applied and logged, the others refused with
the keys named, before anything is restored."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from hookbus import ConfigError, Hook, SSLTrainer
from hookbus.engine.checkpoint.checkpoint_io import newest_valid_checkpoint
from hookbus.engine.config.config_changes import config_changes
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.meter_sync import MeterSyncHook
from tests.conftest import tiny_config
from tests.failure_hooks import TerminateAt


def run(run_dir: Path, *extra: Hook, **sections: Any) -> Any:
    optimizer = {"num_epochs": 1, "warmup_epochs": 0, **sections.pop("optimizer", {})}
    cfg = tiny_config(run_dir, optimizer=optimizer, **sections)
    return SSLTrainer(cfg, hooks=[MeterSyncHook(), CheckpointHook(run_dir), *extra]).train()


def test_training_longer_is_applied_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "run")
    with caplog.at_level(logging.INFO, logger="hookbus"):
        state = run(
            tmp_path / "run",
            optimizer={"num_epochs": 2},
            trainer={"log_frequency": 2},
            checkpoint={"change_finished": True},  # a finished run goes on when asked
        )
    assert state.iteration == 6
    assert "optimizer.num_epochs: 1 -> 2" in caplog.text
    assert "trainer.log_frequency: 1 -> 2" in caplog.text


@pytest.mark.parametrize(
    ("section", "change", "named"),
    [
        ("model", {"head": {"dims": [16, 32, 8]}}, "model.head.dims: [16, 16, 8] -> [16, 32, 8]"),
        ("loss", {"temperature": 0.2}, "loss.temperature: 0.5 -> 0.2"),
        ("optimizer", {"weight_decay": 0.5}, "optimizer.weight_decay: 1e-05 -> 0.5"),
        ("optimizer", {"name": "sgd"}, "optimizer.name: 'adamw' -> 'sgd'"),
        ("data", {"batch_size": 4}, "data.batch_size: 8 -> 4"),
        ("trainer", {"seed": 7}, "trainer.seed: 0 -> 7"),
    ],
)
def test_a_change_that_would_mix_two_runs_is_refused(
    tmp_path: Path, section: str, change: dict, named: str
) -> None:
    run(tmp_path / "run")
    before = newest_valid_checkpoint(tmp_path / "run")[0]
    sections: dict[str, Any] = {section: change}
    if section == "optimizer":
        change["num_epochs"] = 2
    else:
        sections["optimizer"] = {"num_epochs": 2}
    with pytest.raises(ConfigError, match="cannot change in a resumed run") as error:
        run(tmp_path / "run", **sections)
    assert named in str(error.value)
    assert newest_valid_checkpoint(tmp_path / "run")[0] == before


def test_meters_may_change_at_a_phase_boundary_only(tmp_path: Path) -> None:
    run(tmp_path / "done")
    state = run(
        tmp_path / "done",
        optimizer={"num_epochs": 2},
        meters={"knn": {"k": 2}},
        checkpoint={"change_finished": True},
    )
    assert state.iteration == 6
    run(tmp_path / "inside", TerminateAt(2))  # stopped inside the first train phase
    with pytest.raises(ConfigError, match=r"inside a phase.*meters.knn.k: 3 -> 2"):
        run(tmp_path / "inside", meters={"knn": {"k": 2}}, trainer={"resume_stopped": True})


def test_keys_only_one_config_has_are_left_out() -> None:
    cfg = tiny_config(Path("runs/x"))
    saved = cfg.model_dump(mode="json")
    del saved["trainer"]["resume_stopped"]  # a checkpoint from before the key existed
    saved["trainer"]["retired_key"] = 1  # or after one was removed
    assert config_changes(saved, cfg, mid_phase=True, source="old") == []

"""What the W&B and MLflow hooks share (``ExperimentTracker``), checked on both.

Each case is skipped when its tracker's extra is not installed; ``make test`` installs both.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hookbus import FakeEngine, SSLEvents
from hookbus.cli import main
from hookbus.hooks.experiment_tracker import ExperimentTracker
from hookbus.hooks.mlflow_tracker import MlflowHook
from hookbus.hooks.wandb_tracker import WandbHook

ROOT = Path(__file__).resolve().parents[2]
TRACKERS: dict[str, Callable[[], ExperimentTracker]] = {
    "wandb": lambda: WandbHook(log_frequency=1, mode="offline"),
    "mlflow": lambda: MlflowHook(log_frequency=1),
}
"""Each tracker hook, by its package, built to log every iteration."""


@pytest.mark.parametrize("package", sorted(TRACKERS))
def test_other_ranks_log_nothing(tmp_path: Path, package: str) -> None:
    pytest.importorskip(package, reason=f"the {package} extra is not installed")
    engine = FakeEngine(rank=1, run_dir=tmp_path, phase_name="train", loss=torch.tensor(0.5))
    hook = TRACKERS[package]().attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    engine.step(train=True)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    engine.fire_event(SSLEvents.ON_END)
    assert not hook.is_open and hook.run_id is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("package", sorted(TRACKERS))
def test_enabling_it_without_the_package_is_a_config_error_naming_the_extra(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    package: str,
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == package else find_spec(name, *args),
    )
    recipe = str(ROOT / "configs" / "simclr_digits.yaml")
    run_dir = tmp_path / "run"
    enable = f"hooks.{package}.enabled=true"
    assert main(["validate", recipe, enable, f"checkpoint.dir={run_dir}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"hookbus validate: error: hooks.{package}.enabled: the {package} package is not "
        f"installed; pip install 'hookbus[{package}]'"
    )
    assert not run_dir.exists()

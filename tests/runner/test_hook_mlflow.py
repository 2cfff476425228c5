"""The MLflow hook against the real library: a run's local store (``mlflow.db`` in the run
directory) is read back through MLflow's own client.

Skipped when the mlflow extra is not installed; ``make test`` installs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from hookbus import HOOKS, Config, Priority, SSLTrainer, default_hooks
from hookbus.engine.config.config_changes import flatten
from hookbus.hooks.mlflow_tracker import MlflowHook
from tests.conftest import tiny_config
from tests.failure_hooks import PoisonOutput

ROOT = Path(__file__).resolve().parents[2]
SKIP_REASON = "the mlflow extra is not installed: pip install 'hookbus[mlflow]'"
MLFLOW = {"enabled": True, "experiment": "tests", "run_name": "tiny"}
EVALUATION = {"enabled": True, "labels_per_class": 2, "draws": 1}


@pytest.fixture(scope="module")
def mlflow_client() -> type:
    """MLflow's client class; skips the test when the extra is not installed."""
    tracking = pytest.importorskip("mlflow.tracking", reason=SKIP_REASON)
    return tracking.MlflowClient


def train(run_dir: Path, num_epochs: int) -> None:
    """Train the tiny config into ``run_dir`` with the MLflow hook on, up to ``num_epochs``."""
    cfg = tiny_config(
        run_dir,
        optimizer={"num_epochs": num_epochs, "warmup_epochs": 0},
        trainer={"log_frequency": 2, "test_every_num_epochs": 1},
        hooks={"mlflow": MLFLOW, "evaluation_report": EVALUATION},
        checkpoint={"change_finished": True},  # the second call goes on from the first
    )
    SSLTrainer(cfg).train()


def local_store(run_dir: Path, client_class: type) -> Any:
    """A client of the run directory's local store."""
    return client_class(f"sqlite:///{(run_dir / 'mlflow.db').resolve()}")


def only_run(client: Any) -> Any:
    """The one run of the test experiment."""
    experiment = client.get_experiment_by_name("tests")
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory: pytest.TempPathFactory, mlflow_client: type) -> Path:
    """A run trained one epoch, then resumed to two in the same directory."""
    run_dir = tmp_path_factory.mktemp("mlflow_run") / "run"
    train(run_dir, num_epochs=1)
    train(run_dir, num_epochs=2)
    return run_dir


def test_registered_after_the_reports_it_logs() -> None:
    assert HOOKS.get("mlflow") is MlflowHook
    assert MlflowHook.priority == Priority.REPORT + 10


@pytest.mark.slow
def test_from_config_reads_its_section(mlflow_client: type) -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 3
    cfg.hooks.mlflow = cfg.hooks.mlflow.model_validate({**MLFLOW, "tracking_uri": "http://x:5000"})
    hook = MlflowHook.from_config(cfg)
    assert (hook.log_frequency, hook.tracking_uri) == (3, "http://x:5000")
    assert (hook.experiment, hook.run_name, hook.name) == ("tests", "tiny", "mlflow")


@pytest.mark.slow
def test_a_resumed_run_reopens_the_same_run(resumed_run: Path, mlflow_client: type) -> None:
    client = local_store(resumed_run, mlflow_client)
    run = only_run(client)
    assert run.info.run_name == "tiny"
    checkpoint = torch.load(resumed_run / "checkpoint.torch", weights_only=True)
    assert checkpoint["hooks"]["mlflow"] == {"run_id": run.info.run_id}
    assert history(client, run.info.run_id, "train/loss_epoch")[-1][0] == 1


@pytest.mark.slow
def test_the_effective_config_is_logged_as_dotted_parameters(
    resumed_run: Path, mlflow_client: type
) -> None:
    run = only_run(local_store(resumed_run, mlflow_client))
    config = flatten(yaml.safe_load((resumed_run / "config.yaml").read_text()))
    expected = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    # MLflow keeps a parameter's first value: the resumed run changed num_epochs.
    assert expected.pop("optimizer.num_epochs") == "2"
    assert run.data.params.pop("optimizer.num_epochs") == "1"
    assert run.data.params == expected
    assert "hooks.mlflow.experiment" in expected
    log = (resumed_run / "log.txt").read_text()
    assert "changed since: optimizer.num_epochs: 1 -> 2" in log


@pytest.mark.slow
def test_train_scalars_are_the_plotted_points_at_their_iteration(
    resumed_run: Path, mlflow_client: type
) -> None:
    client = local_store(resumed_run, mlflow_client)
    run_id = only_run(client).info.run_id
    curves = json.loads((resumed_run / "curves.json").read_text())
    assert curves["steps"] == [2, 4, 6]
    for key in ("loss", "lr"):
        expected = list(zip(curves["steps"], curves[key], strict=True))
        assert history(client, run_id, f"train/{key}") == expected


@pytest.mark.slow
def test_phase_results_are_those_of_metrics_json_at_their_train_phase(
    resumed_run: Path, mlflow_client: type
) -> None:
    client = local_store(resumed_run, mlflow_client)
    run_id = only_run(client).info.run_id
    rows = [json.loads(line) for line in (resumed_run / "metrics.json").read_text().splitlines()]
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for name in ("loss", "knn_top1"):
            if name in row:
                key = f"{row['phase']}/{'loss_epoch' if name == 'loss' else name}"
                expected.setdefault(key, []).append((row["train_phase_idx"], row[name]))
    assert len(expected["test/knn_top1"]) == 2
    assert {key: history(client, run_id, key) for key in expected} == expected


@pytest.mark.slow
def test_the_config_curves_and_evaluation_are_artifacts(
    resumed_run: Path, mlflow_client: type
) -> None:
    client = local_store(resumed_run, mlflow_client)
    run_id = only_run(client).info.run_id
    names = sorted(artifact.path for artifact in client.list_artifacts(run_id))
    assert names == ["config.yaml", "curves.png", "evaluation.json"]
    folder = Path(client.download_artifacts(run_id, "", str(resumed_run.parent / "download")))
    for name in names:
        assert (folder / name).read_bytes() == (resumed_run / name).read_bytes()
    assert (resumed_run / "mlartifacts").is_dir()


@pytest.mark.slow
def test_a_finished_run_is_finished(resumed_run: Path, mlflow_client: type) -> None:
    assert only_run(local_store(resumed_run, mlflow_client)).info.status == "FINISHED"


@pytest.mark.slow
def test_a_failed_run_is_ended_as_failed(tmp_path: Path, mlflow_client: type) -> None:
    cfg = tiny_config(tmp_path / "run", hooks={"mlflow": MLFLOW})
    trainer = SSLTrainer(cfg, hooks=[*default_hooks(cfg), PoisonOutput(at_iteration=2)])
    with pytest.raises(FloatingPointError):
        trainer.train()
    assert only_run(local_store(tmp_path / "run", mlflow_client)).info.status == "FAILED"

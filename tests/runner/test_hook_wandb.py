"""The W&B hook against the real library in offline mode: what a run leaves in its offline
folders is read back record by record (with wandb's own protobuf messages).

Skipped when the wandb extra is not installed; ``make test`` installs it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from hookbus import HOOKS, Config, Priority, SSLTrainer, default_hooks
from hookbus.engine.bus.priorities import priority_label
from hookbus.hooks.wandb_tracker import WandbHook
from tests.conftest import tiny_config
from tests.failure_hooks import PoisonOutput

ROOT = Path(__file__).resolve().parents[2]
SKIP_REASON = "the wandb extra is not installed: pip install 'hookbus[wandb]'"
WANDB = {"enabled": True, "mode": "offline", "project": "tests", "tags": ["tiny"]}
EVALUATION = {"enabled": True, "labels_per_class": 2, "draws": 1}


@pytest.fixture(scope="module")
def wandb_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """W&B offline, quiet, its settings and caches in a temporary folder (never in home)."""
    pytest.importorskip("wandb", reason=SKIP_REASON)
    home = tmp_path_factory.mktemp("wandb_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        for name in ("DIR", "CONFIG_DIR", "CACHE_DIR", "DATA_DIR", "ARTIFACT_DIR"):
            patch.setenv(f"WANDB_{name}", str(home / name.lower()))
        patch.delenv("WANDB_API_KEY", raising=False)
        yield


def wait_for_the_offline_files() -> None:
    """Return once W&B's service has written the finished runs to disk.

    ``run.finish()`` returns once the service has handled the run's exit record; the
    service closes the run's ``.wandb`` file after that, when it takes finish's last
    message, which finish does not wait for (at once on an idle machine, a while later on
    a loaded one). ``wandb.teardown()`` (what W&B runs at interpreter exit) returns once
    the service process has ended, every file written.
    """
    import wandb

    wandb.teardown()


def train(run_dir: Path, num_epochs: int, **hooks: Any) -> None:
    """Train the tiny config into ``run_dir`` with the W&B hook on, up to ``num_epochs``;
    return once the run's offline files are written."""
    cfg = tiny_config(
        run_dir,
        optimizer={"num_epochs": num_epochs, "warmup_epochs": 0},
        trainer={"log_frequency": 2, "test_every_num_epochs": 1},
        hooks={"wandb": WANDB, "evaluation_report": EVALUATION, **hooks},
        checkpoint={"change_finished": True},  # the second call goes on from the first
    )
    SSLTrainer(cfg).train()
    wait_for_the_offline_files()


def read_records(path: Path) -> list[Any]:
    """The records of a ``.wandb`` file: a 7-byte header, then 32 KiB blocks of chunks,
    each a 7-byte header (checksum, length, kind: 1 whole, 2 first, 3 middle, 4 last)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pending, offset, block = [], b"", 7, 32768
    while offset + 7 <= len(data):
        left = block - offset % block
        _, length, kind = struct.unpack("<IHB", data[offset : offset + 7])
        if left < 7 or (kind == 0 and length == 0):
            offset += left  # the block's padding
            continue
        pending += data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        if kind in (1, 4):
            records.append(Record.FromString(pending))
            pending = b""
    return records


def offline_runs(run_dir: Path) -> list[Path]:
    """The run's offline folders, oldest first."""
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def history(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(step, value), ...]}`` of the logged rows of one offline folder."""
    rows: dict[str, list[tuple[int, float]]] = {}
    for record in read_records(next(folder.glob("run-*.wandb"))):
        if record.WhichOneof("record_type") == "history":
            items = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            for key, value in items.items():
                if not key.startswith("_"):
                    rows.setdefault(key, []).append((items["_step"], value))
    return rows


def only(folder: Path, kind: str) -> Any:
    """The one record of ``kind`` (``run``, ``exit``) in an offline folder."""
    records = [r for r in read_records(next(folder.glob("run-*.wandb"))) if r.HasField(kind)]
    assert len(records) == 1, records
    return getattr(records[0], kind)


def metrics_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory: pytest.TempPathFactory, wandb_env: None) -> Path:
    """A run trained one epoch, then resumed to two in the same directory."""
    run_dir = tmp_path_factory.mktemp("wandb_run") / "run"
    train(run_dir, num_epochs=1)
    train(run_dir, num_epochs=2)
    return run_dir


def test_registered_after_the_reports_it_uploads() -> None:
    assert HOOKS.get("wandb") is WandbHook
    assert WandbHook.priority == Priority.REPORT + 10
    assert priority_label(WandbHook.priority) == "REPORT+10"


@pytest.mark.slow
def test_from_config_reads_its_section(wandb_env: None) -> None:
    cfg = Config()
    cfg.trainer.log_frequency = 3
    cfg.hooks.wandb = cfg.hooks.wandb.model_validate({**WANDB, "dir": "elsewhere"})
    hook = WandbHook.from_config(cfg)
    assert (hook.log_frequency, hook.project, hook.mode) == (3, "tests", "offline")
    assert (hook.tags, hook.dir, hook.name) == (["tiny"], Path("elsewhere"), "wandb")


@pytest.mark.slow
def test_a_resumed_run_reopens_the_same_run_id(resumed_run: Path) -> None:
    first, second = offline_runs(resumed_run)
    run_id = only(first, "run").run_id
    assert first.name.endswith(f"-{run_id}") and second.name.endswith(f"-{run_id}")
    assert only(second, "run").run_id == run_id
    checkpoint = torch.load(resumed_run / "checkpoint.torch", weights_only=True)
    assert checkpoint["hooks"]["wandb"] == {"run_id": run_id}


@pytest.mark.slow
def test_the_effective_config_is_the_run_config(resumed_run: Path) -> None:
    first, second = offline_runs(resumed_run)
    for folder, epochs in ((first, 1), (second, 2)):
        config = {u.key: json.loads(u.value_json) for u in only(folder, "run").config.update}
        assert config["optimizer"]["num_epochs"] == epochs
        assert config["hooks"]["wandb"]["project"] == "tests"
    assert only(first, "run").project == "tests"
    assert list(only(first, "run").tags) == ["tiny"]


@pytest.mark.slow
def test_train_scalars_are_the_plotted_points_at_their_iteration(resumed_run: Path) -> None:
    curves = json.loads((resumed_run / "curves.json").read_text())
    logged = {"train/loss": [], "train/lr": []}
    for folder in offline_runs(resumed_run):
        rows = history(folder)
        for key in logged:
            logged[key] += rows[key]
    assert logged["train/loss"] == list(zip(curves["steps"], curves["loss"], strict=True))
    assert logged["train/lr"] == list(zip(curves["steps"], curves["lr"], strict=True))
    assert [step for step, _ in logged["train/loss"]] == [2, 4, 6]


@pytest.mark.slow
def test_phase_results_are_those_of_metrics_json_at_their_iteration(resumed_run: Path) -> None:
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in metrics_rows(resumed_run):
        expected.setdefault(f"{row['phase']}/loss_epoch", []).append(
            (row["iteration"], row["loss"])
        )
        if "knn_top1" in row:
            expected.setdefault(f"{row['phase']}/knn_top1", []).append(
                (row["iteration"], row["knn_top1"])
            )
    logged: dict[str, list[tuple[int, float]]] = {key: [] for key in expected}
    for folder in offline_runs(resumed_run):
        rows = history(folder)
        for key in expected:
            logged[key] += rows[key]
    assert len(expected["test/knn_top1"]) == 2
    assert logged == expected


@pytest.mark.slow
def test_the_curves_and_the_evaluation_are_copied_into_the_run_files(resumed_run: Path) -> None:
    last = offline_runs(resumed_run)[-1] / "files"
    for name in ("curves.png", "evaluation.json"):
        assert not (last / name).is_symlink()
        assert (last / name).read_bytes() == (resumed_run / name).read_bytes()


@pytest.mark.slow
def test_both_starts_finish_their_run_successfully(resumed_run: Path) -> None:
    assert [only(folder, "exit").exit_code for folder in offline_runs(resumed_run)] == [0, 0]


@pytest.mark.slow
def test_a_failed_run_is_finished_as_failed(tmp_path: Path, wandb_env: None) -> None:
    cfg = tiny_config(tmp_path / "run", hooks={"wandb": WANDB})
    trainer = SSLTrainer(cfg, hooks=[*default_hooks(cfg), PoisonOutput(at_iteration=2)])
    with pytest.raises(FloatingPointError):
        trainer.train()
    wait_for_the_offline_files()
    (folder,) = offline_runs(tmp_path / "run")
    assert only(folder, "exit").exit_code == 1


@pytest.mark.slow
def test_disabled_mode_opens_no_run(tmp_path: Path, wandb_env: None) -> None:
    train(tmp_path / "run", num_epochs=1, wandb={**WANDB, "mode": "disabled"})
    assert not (tmp_path / "run" / "wandb").exists()

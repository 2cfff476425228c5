"""Two gloo processes on loopback, launched by torchrun, against one process."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, list_checkpoints, load_checkpoint
from tests.torchrun import python, torchrun

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
LINEAR_EVAL = ROOT / "configs" / "linear_eval_digits.yaml"
SMALL_MODEL = ["model.backbone.width=8", "model.head.dims=[32,32,16]"]
QUIET_CPU = [
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.summary_plot.enabled=false",  # no curves.png: about 1.5 s a run
    "distributed.backend=gloo",
    "machine.device=cpu",
    "machine.num_threads=1",
]


def _hookbus(
    run_dir: Path,
    *overrides: str,
    processes: int,
    recipe: Path = RECIPE,
    model: Sequence[str] = SMALL_MODEL,
) -> None:
    """``hookbus train recipe`` on the CPU, quiet, with ``model`` and ``overrides``."""
    args = ["train", str(recipe), f"checkpoint.dir={run_dir}", *QUIET_CPU, *model, *overrides]
    if processes == 1:
        python("-m", "hookbus", *args, "-q")
    else:
        torchrun("-m", "hookbus", *args, "-q", processes=processes)


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]


@pytest.mark.slow
def test_two_process_training_writes_one_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _hookbus(run, "optimizer.num_epochs=1", "trainer.test_every_num_epochs=1", processes=2)
    rows = _metrics(run)
    assert [row["phase"] for row in rows] == ["train", "test"]  # rank 0 alone writes
    checkpoint = load_checkpoint(run / POINTER_NAME)
    assert checkpoint["iteration"] == 2  # 1297 images, 2 ranks, 256 per rank: 2 steps
    assert len(list_checkpoints(run)) == 1


@pytest.fixture(scope="module")
def test_phase_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The run directories of one test phase of the linear-evaluation recipe at random
    init (kNN and accuracy meters, the online probe and the evaluation report on), run
    in one process and on two ranks. 499 test images: two ranks' shards are uneven, so
    rank 1's is padded with one image that no evaluation may count."""
    tmp_path = tmp_path_factory.mktemp("synced")
    one, two = tmp_path / "one", tmp_path / "two"
    linear_eval = [
        "trainer.test_only=true",
        "model.linear_eval.checkpoint=null",
        "data.test_size=499",
        "hooks.online_probe.enabled=true",
        "hooks.online_probe.num_classes=10",
        "hooks.evaluation_report.enabled=true",
        "hooks.evaluation_report.draws=2",
    ]
    _hookbus(one, *linear_eval, recipe=LINEAR_EVAL, model=(), processes=1)
    _hookbus(two, *linear_eval, recipe=LINEAR_EVAL, model=(), processes=2)
    return one, two


@pytest.fixture(scope="module")
def test_phase_rows(test_phase_runs: tuple[Path, Path]) -> tuple[dict, dict]:
    """The metrics.json row of the test phase, in one process and on two ranks."""
    [single], [pair] = (_metrics(run) for run in test_phase_runs)
    return single, pair


@pytest.mark.slow
def test_evaluation_report_on_two_ranks_scores_the_whole_split_as_one_process(
    test_phase_runs: tuple[Path, Path],
) -> None:
    single, pair = (json.loads((run / "evaluation.json").read_text()) for run in test_phase_runs)
    assert 0.5 < single["random init"]["knn_top1"] < 1.0
    assert 0.5 < single["random init"]["probe_top1"] < 1.0
    assert pair == single


@pytest.mark.slow
def test_online_probe_test_counts_on_two_ranks_equal_one_process(
    test_phase_rows: tuple[dict, dict],
) -> None:
    single, pair = test_phase_rows
    assert 0.0 < single["probe_top1"] < 0.5  # a zero probe: the share of class 0
    assert pair["probe_top1"] == single["probe_top1"]


@pytest.mark.slow
def test_knn_meter_synced_over_two_ranks_equals_one_process(
    test_phase_rows: tuple[dict, dict],
) -> None:
    single, pair = test_phase_rows
    assert 0.5 < single["knn_top1"] < 1.0
    assert pair["knn_top1"] == single["knn_top1"]


@pytest.mark.slow
def test_accuracy_meter_and_loss_synced_over_two_ranks_equal_one_process(
    test_phase_rows: tuple[dict, dict],
) -> None:
    single, pair = test_phase_rows
    assert 0.0 < single["top1"] < single["top5"] < 1.0
    assert (pair["top1"], pair["top5"]) == (single["top1"], single["top5"])
    # The mean of the ranks' mean losses over 250 and 249 of the 499 test images.
    assert abs(pair["loss"] - single["loss"]) < 1e-2

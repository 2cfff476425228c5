"""The summary-plot hook on the fake engine: what it records, writes, and keeps across a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from hookbus import HOOKS, FakeEngine, Priority, SSLEvents
from hookbus.engine.checkpoint.run_curves import CURVES_FILE, PLOT_FILE
from hookbus.hooks.summary_plot import SummaryPlotHook


def train_steps(engine: FakeEngine, count: int) -> None:
    for _ in range(count):
        engine.state.loss = torch.tensor(1.0 / (engine.state.iteration + 1))
        engine.state.lr = 0.1 * (engine.state.iteration + 1)
        engine.step(train=True)


def finish_phase(engine: FakeEngine, **fields: object) -> None:
    for name, value in fields.items():
        setattr(engine.state, name, value)
    engine.fire_event(SSLEvents.ON_PHASE_END)
    engine.state.batches = 0


def test_registered_with_priority_between_reporting_and_checkpoint() -> None:
    assert HOOKS.get("summary_plot") is SummaryPlotHook
    hook = SummaryPlotHook(log_frequency=1)
    assert (hook.name, hook.priority) == ("summary_plot", Priority.REPORT)


def test_log_frequency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="log_frequency"):
        SummaryPlotHook(log_frequency=0)


def test_records_loss_and_lr_at_log_frequency_only(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path)
    hook = SummaryPlotHook(log_frequency=2).attach(engine)
    train_steps(engine, 5)
    engine.step(train=False)
    assert hook.curves.steps == [2, 4]
    assert hook.curves.loss == pytest.approx([1 / 2, 1 / 4])
    assert hook.curves.lr == pytest.approx([0.2, 0.4])


def test_phase_end_records_the_phase_and_writes_curves_json(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path)
    SummaryPlotHook(log_frequency=1).attach(engine)
    train_steps(engine, 2)
    finish_phase(
        engine,
        phase_idx=0,
        phase_name="train",
        train_phase_idx=0,
        loss_sum=torch.tensor(3.0),
    )
    finish_phase(
        engine,
        phase_idx=1,
        phase_name="test",
        train=False,
        batches=1,
        loss_sum=torch.tensor(0.5),
        metrics={"knn_top1": 0.75},
    )
    saved = json.loads((tmp_path / CURVES_FILE).read_text())
    assert saved["steps"] == [1, 2]
    assert saved["phases"] == [
        {
            "phase_idx": 0,
            "phase": "train",
            "train": True,
            "train_phase_idx": 0,
            "iteration": 2,
            "loss": 1.5,
        },
        {
            "phase_idx": 1,
            "phase": "test",
            "train": False,
            "train_phase_idx": 0,
            "iteration": 2,
            "loss": 0.5,
            "knn_top1": 0.75,
        },
    ]


@pytest.mark.slow
def test_end_draws_the_png_and_names_it_in_the_summary(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path)
    SummaryPlotHook(log_frequency=1).attach(engine)
    train_steps(engine, 3)
    finish_phase(engine, phase_idx=0, phase_name="train", loss_sum=torch.tensor(1.0))
    engine.fire_event(SSLEvents.ON_END)
    png = tmp_path / PLOT_FILE
    assert engine.state.summary["curves"] == png
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.size[0] > image.size[1] > 100


def test_other_ranks_record_and_write_nothing(tmp_path: Path) -> None:
    engine = FakeEngine(run_dir=tmp_path, rank=1)
    hook = SummaryPlotHook(log_frequency=1).attach(engine)
    train_steps(engine, 2)
    finish_phase(engine, phase_idx=0, phase_name="train", loss_sum=torch.tensor(1.0))
    engine.fire_event(SSLEvents.ON_END)
    assert hook.curves.steps == []
    assert list(tmp_path.iterdir()) == []


def test_state_dict_carries_the_curves_into_a_resumed_run(tmp_path: Path) -> None:
    first = FakeEngine(run_dir=tmp_path)
    before = SummaryPlotHook(log_frequency=1).attach(first)
    train_steps(first, 2)
    finish_phase(first, phase_idx=0, phase_name="train", loss_sum=torch.tensor(1.0))

    saved = before.state_dict()
    resumed = FakeEngine(run_dir=tmp_path, iteration=2, phase_idx=0, resumed_from="ckpt")
    after = SummaryPlotHook(log_frequency=1)
    after.load_state_dict(saved)
    after.attach(resumed)
    resumed.fire_event(SSLEvents.ON_START)
    train_steps(resumed, 2)
    assert after.curves.steps == [1, 2, 3, 4]
    assert [row["phase_idx"] for row in after.curves.phases] == [0]


def test_resume_without_saved_state_reads_back_metrics_json(tmp_path: Path) -> None:
    rows = [
        {"phase_idx": 0, "phase": "train", "train": True, "iteration": 5, "loss": 2.0},
        {"phase_idx": 1, "phase": "test", "train": False, "iteration": 5, "loss": 1.0},
        {"phase_idx": 1, "phase": "test", "train": False, "iteration": 5, "loss": 0.9},
        {"phase_idx": 2, "phase": "train", "train": True, "iteration": 10, "loss": 1.8},
    ]
    lines = [json.dumps({"train_phase_idx": 0, **row}) for row in rows]
    (tmp_path / "metrics.json").write_text("\n".join(lines) + "\n")
    engine = FakeEngine(run_dir=tmp_path, phase_idx=1, resumed_from="ckpt")
    hook = SummaryPlotHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    assert [(row["phase_idx"], row["loss"]) for row in hook.curves.phases] == [(0, 2.0), (1, 0.9)]


def test_a_fresh_run_ignores_an_old_metrics_json(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text('{"phase_idx": 0, "phase": "train", "loss": 1}\n')
    engine = FakeEngine(run_dir=tmp_path)
    hook = SummaryPlotHook(log_frequency=1).attach(engine)
    engine.fire_event(SSLEvents.ON_START)
    assert hook.curves.phases == []

"""OnlineProbeHook: learning on detached features, probe_top1, state, config, real runs."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from pydantic import ValidationError

from hookbus import Config, FakeEngine, SSLEvents, SSLTrainer, default_hooks
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.errors import PreemptedError
from hookbus.hooks.online_probe import OnlineProbeHook
from tests.conftest import tiny_config
from tests.integration.test_methods_resume import StopAfterPhase, assert_equal_states
from tests.integration.test_preemption import SignalAt
from tests.loss_reference import on_two_ranks, two_rank_results

CENTRES = torch.tensor([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]])


def toy_batch(seed: int, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Three linearly separable blobs in 2-D: features ``[size, 2]`` and labels."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(size) % 3
    return CENTRES[labels] + 0.3 * torch.randn(size, 2, generator=generator), labels


def train_step(engine: FakeEngine, features: torch.Tensor, labels: torch.Tensor) -> None:
    engine.state.last_output = {"view_features": [features, features + 1]}
    engine.state.last_batch = {"label": labels}
    engine.step(train=True)


def run_test_phase(engine: FakeEngine, features: torch.Tensor, labels: torch.Tensor) -> None:
    engine.state.train, engine.state.batches = False, 0
    engine.state.metrics = {}
    engine.fire_event(SSLEvents.ON_PHASE_START)
    engine.state.last_output = {"features": features}
    engine.state.last_batch = {"image": features, "label": labels}
    engine.step()
    engine.fire_event(SSLEvents.ON_PHASE_END)


def trained_probe(steps: int = 60) -> tuple[OnlineProbeHook, FakeEngine]:
    hook = OnlineProbeHook(num_classes=3, lr=0.1)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_START)
    for step in range(steps):
        train_step(engine, *toy_batch(step))
    return hook, engine


def test_probe_learns_a_separable_problem_and_reports_probe_top1() -> None:
    _, engine = trained_probe()
    run_test_phase(engine, *toy_batch(1000, size=30))
    assert engine.state.metrics == {"probe_top1": 1.0}


def test_train_phase_reports_the_accuracy_before_each_step() -> None:
    hook = OnlineProbeHook(num_classes=3, lr=0.1)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.fire_event(SSLEvents.ON_PHASE_START)
    train_step(engine, *toy_batch(0))  # the zero probe predicts class 0 everywhere
    engine.fire_event(SSLEvents.ON_PHASE_END)
    assert engine.state.metrics == {"probe_top1": pytest.approx(1 / 3)}


def test_no_gradient_reaches_the_backbone_and_its_graph_is_left_intact() -> None:
    backbone = torch.nn.Linear(2, 2)
    inputs, labels = toy_batch(0)
    reference = backbone(inputs).pow(2).sum()
    reference.backward()
    expected = backbone.weight.grad.clone()
    backbone.zero_grad(set_to_none=True)

    hook = OnlineProbeHook(num_classes=3, lr=0.1)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    features = backbone(inputs)
    for _ in range(3):
        train_step(engine, features, labels)
    assert backbone.weight.grad is None and backbone.bias.grad is None
    assert hook.probe.weight.grad is not None
    features.pow(2).sum().backward()  # the SSL loss's backward still works after the probe
    assert torch.equal(backbone.weight.grad, expected)


def test_unlabelled_images_are_left_out() -> None:
    hook = OnlineProbeHook(num_classes=3)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    features, _ = toy_batch(0, size=6)
    train_step(engine, features, torch.tensor([0, -1, -1, -1, -1, -1]))
    assert (hook.correct.item(), hook.total.item()) == (1.0, 1.0)
    engine.state.metrics = {}
    run_test_phase(engine, features, torch.full((6,), -1))
    assert engine.state.metrics == {}  # no labelled image: no probe_top1
    assert torch.isfinite(hook.probe.weight).all()


def test_test_phases_do_not_train_the_probe() -> None:
    hook, engine = trained_probe(steps=5)
    before = hook.probe.weight.clone()
    run_test_phase(engine, *toy_batch(7))
    assert torch.equal(hook.probe.weight, before)


def test_a_label_beyond_num_classes_is_reported() -> None:
    hook = OnlineProbeHook(num_classes=3)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    with pytest.raises(ValueError, match="num_classes is 3"):
        train_step(engine, torch.ones(2, 2), torch.tensor([0, 5]))


def test_a_model_without_view_features_is_reported() -> None:
    hook = OnlineProbeHook(num_classes=3)
    engine = FakeEngine(train=True)
    hook.attach(engine)
    engine.state.last_output = {"logits": torch.ones(2, 3)}
    engine.state.last_batch = {"label": torch.tensor([0, 1])}
    with pytest.raises(KeyError, match="view_features"):
        engine.step()


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_state_round_trip_continues_bit_exactly(optimizer: str) -> None:
    first = OnlineProbeHook(num_classes=3, lr=0.05, optimizer=optimizer)  # type: ignore[arg-type]
    engine = FakeEngine(train=True)
    first.attach(engine)
    for step in range(4):
        train_step(engine, *toy_batch(step))
    second = OnlineProbeHook(num_classes=3, lr=0.05, optimizer=optimizer)  # type: ignore[arg-type]
    second.load_state_dict(first.state_dict())
    other = FakeEngine(train=True, batches=4)
    second.attach(other)
    other.fire_event(SSLEvents.ON_START)
    other.fire_event(SSLEvents.ON_PHASE_START)  # resumed inside the phase: counts kept
    for step in range(4, 7):
        train_step(engine, *toy_batch(step))
        train_step(other, *toy_batch(step))
    assert_equal_states(first.state_dict(), second.state_dict(), "online_probe")


def test_state_before_the_first_step_round_trips() -> None:
    hook = OnlineProbeHook(num_classes=3)
    state = hook.state_dict()
    assert (state["probe"], state["optimizer"], state["counts"].tolist()) == ({}, {}, [0.0, 0.0])
    restored = OnlineProbeHook(num_classes=3)
    restored.load_state_dict(state)
    assert restored.probe is None


def test_metrics_are_written_after_the_meter_sync_and_before_the_reports() -> None:
    assert Priority.FIRST < OnlineProbeHook.priority < Priority.REPORT


def test_config_needs_num_classes_when_enabled() -> None:
    with pytest.raises(ValidationError, match="num_classes is required"):
        Config.model_validate({"hooks": {"online_probe": {"enabled": True}}})
    cfg = Config.model_validate({"hooks": {"online_probe": {"enabled": True, "num_classes": 4}}})
    probes = [hook for hook in default_hooks(cfg) if isinstance(hook, OnlineProbeHook)]
    assert [(hook.num_classes, hook.lr, hook.optimizer_name) for hook in probes] == [
        (4, 1e-3, "adamw")
    ]
    assert not any(isinstance(hook, OnlineProbeHook) for hook in default_hooks(Config()))


PROBE = {"online_probe": {"enabled": True, "num_classes": 4, "lr": 0.01}}


def probe_run(run_dir: Path, *extra: Any) -> Any:
    """Two epochs on the tiny data (train, test, train, test) with the probe on."""
    cfg = tiny_config(run_dir, hooks={"progress_bar": {"enabled": False}, **PROBE})
    trainer = SSLTrainer(cfg, hooks=[*default_hooks(cfg), *extra])
    return trainer.train()


def metrics_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]


def probe_state(state: Any) -> dict:
    return next(hook for hook in state.hooks if hook.name == "online_probe").state_dict()


@pytest.mark.slow
def test_a_real_run_writes_probe_top1_to_metrics_json(tmp_path: Path) -> None:
    state = probe_run(tmp_path / "run")
    rows = metrics_rows(tmp_path / "run")
    assert [row["phase"] for row in rows] == ["train", "test", "train", "test"]
    assert all(0.0 <= row["probe_top1"] <= 1.0 for row in rows)
    checkpoint = torch.load(tmp_path / "run" / "checkpoint.torch", weights_only=True)
    assert checkpoint["hooks"]["online_probe"]["probe"]["weight"].shape == (
        4,
        state.base_model.backbone.out_dim,
    )


@pytest.mark.slow
def test_the_probe_leaves_the_ssl_training_unchanged(tmp_path: Path) -> None:
    with_probe = probe_run(tmp_path / "probe")
    cfg = tiny_config(tmp_path / "plain", hooks={"progress_bar": {"enabled": False}})
    without = SSLTrainer(cfg).train()
    assert_equal_states(
        with_probe.base_model.state_dict(), without.base_model.state_dict(), "model"
    )


@pytest.mark.slow
def test_a_run_resumed_after_a_phase_equals_the_straight_one(tmp_path: Path) -> None:
    straight = probe_run(tmp_path / "straight")
    with pytest.raises(Exception, match="stopped after phase 1"):
        probe_run(tmp_path / "resumed", StopAfterPhase(1))
    resumed = probe_run(tmp_path / "resumed")
    assert resumed.resumed_from is not None
    assert_equal_states(probe_state(straight), probe_state(resumed), "online_probe")
    assert metrics_rows(tmp_path / "resumed")[-2:] == metrics_rows(tmp_path / "straight")[-2:]


@pytest.mark.slow
def test_a_run_preempted_mid_phase_equals_the_straight_one(tmp_path: Path) -> None:
    straight = probe_run(tmp_path / "straight")
    with pytest.raises(PreemptedError):
        probe_run(tmp_path / "resumed", SignalAt(4, signal.SIGUSR1))
    resumed = probe_run(tmp_path / "resumed")
    assert_equal_states(probe_state(straight), probe_state(resumed), "online_probe")
    straight_rows = metrics_rows(tmp_path / "straight")
    assert [row["probe_top1"] for row in metrics_rows(tmp_path / "resumed")] == [
        row["probe_top1"] for row in straight_rows
    ]


def sharded_probe(rank: int, world: int) -> dict[str, Any]:
    """The probe's state and test metrics after 5 train steps on this rank's half (or
    all) of each global batch of 12."""
    hook = OnlineProbeHook(num_classes=3, lr=0.1)
    engine = FakeEngine(train=True, rank=rank, world_size=world)
    hook.attach(engine)
    shard = 12 // world
    for step in range(5):
        features, labels = toy_batch(step)
        train_step(engine, *(t[rank * shard : (rank + 1) * shard] for t in (features, labels)))
    features, labels = toy_batch(99)
    run_test_phase(engine, *(t[rank * shard : (rank + 1) * shard] for t in (features, labels)))
    return {"state": hook.state_dict(), "metrics": engine.state.metrics}


@on_two_ranks
def online_probe_on_each_rank() -> dict[str, Any]:
    return sharded_probe(dist.get_rank(), dist.get_world_size())


@pytest.mark.slow
def test_two_ranks_average_the_gradient_and_the_counts_like_one_process() -> None:
    ranks = two_rank_results(online_probe_on_each_rank)
    expected = sharded_probe(rank=0, world=1)
    for rank, got in enumerate(ranks):
        assert got["metrics"] == expected["metrics"]
        for name, value in expected["state"]["probe"].items():
            assert torch.allclose(got["state"]["probe"][name], value, atol=1e-6), (rank, name)
    assert_equal_states(ranks[0]["state"]["probe"], ranks[1]["state"]["probe"], "ranks")

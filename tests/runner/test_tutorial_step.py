"""The train step of the "Write a train step" tutorial (examples/plain_step.py)."""

from __future__ import annotations

from pathlib import Path

import torch
from ignite.engine import Engine

from hookbus import Config, Hook, SSLTrainer
from hookbus.examples.plain_step import plain_step
from hookbus.testing import FakeEngine, tiny_config


class EventLog(Hook):
    """Records the events of the step it watches."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def on_forward(self, engine: Engine) -> None:
        self.seen.append("on_forward")

    def on_loss_and_meter(self, engine: Engine) -> None:
        self.seen.append("on_loss_and_meter")

    def on_backward(self, engine: Engine) -> None:
        self.seen.append("on_backward")

    def on_update(self, engine: Engine) -> None:
        self.seen.append("on_update")


def toy_engine(train: bool) -> FakeEngine:
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    return FakeEngine(
        train=train,
        iteration=1 if train else 0,  # the trainer counts a train step before it runs
        cfg=Config(),
        model=model,
        base_model=model,
        loss_fn=lambda output, batch: output.pow(2).mean(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        device=torch.device("cpu"),
        phase_length=10,
    )


def test_a_train_step_fires_the_four_inner_events_and_updates_the_model() -> None:
    engine = toy_engine(train=True)
    events = EventLog().attach(engine)
    before = engine.state.model.weight.detach().clone()
    plain_step(engine, torch.ones(4, 2))
    assert events.seen == ["on_forward", "on_loss_and_meter", "on_backward", "on_update"]
    assert not torch.equal(engine.state.model.weight, before)
    assert engine.state.lr > 0
    assert engine.state.updates == 1
    assert torch.equal(engine.state.loss_sum, engine.state.loss)


def test_a_test_step_fires_forward_and_loss_only_and_changes_nothing() -> None:
    engine = toy_engine(train=False)
    events = EventLog().attach(engine)
    before = engine.state.model.weight.detach().clone()
    plain_step(engine, torch.ones(4, 2))
    assert events.seen == ["on_forward", "on_loss_and_meter"]
    assert torch.equal(engine.state.model.weight, before)
    assert not engine.state.loss.requires_grad


def test_a_recipe_trains_with_it_by_name(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "run",
        trainer={"imports": ["hookbus.examples.plain_step"], "train_step_name": "plain_step"},
    )
    state = SSLTrainer(cfg).train()
    assert state.iteration == 6  # 2 epochs of 3 steps
    assert set(state.metrics) == {"knn_top1"}

"""A hook's name is the name its class is registered under: the plan and checkpoints use it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ignite.engine import Engine

from hookbus import HOOKS, FakeEngine, Hook, SSLTrainer, default_hooks, register_hook
from hookbus.engine.bus.handler_order import hook_plan
from hookbus.engine.bus.hook import default_name
from hookbus.engine.checkpoint.checkpoint_io import POINTER_NAME, load_checkpoint
from tests.conftest import tiny_config


@register_hook("test_loss_ema")
class LossEMAHook(Hook):
    """A stateful hook whose class name does not snake-case to its registered name."""

    def __init__(self) -> None:
        super().__init__()
        self.average = 0.0

    def on_step(self, engine: Engine) -> None:
        self.average = 0.9 * self.average + 0.1 * float(engine.state.loss)

    def state_dict(self) -> dict[str, Any]:
        return {"average": self.average}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.average = state["average"]


class UnregisteredLossEMAHook(LossEMAHook):
    """A subclass nobody registered."""


def test_a_registered_hook_is_named_as_registered() -> None:
    assert LossEMAHook().name == "test_loss_ema"


def test_the_plan_shows_the_registered_name() -> None:
    engine = FakeEngine()
    LossEMAHook().attach(engine)
    assert hook_plan(engine)["on_step"] == ["test_loss_ema"]


@pytest.mark.slow
def test_checkpoints_carry_the_hook_state_under_the_registered_name(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", optimizer={"num_epochs": 1})
    SSLTrainer(cfg, hooks=[*default_hooks(cfg), LossEMAHook()]).train()
    saved = load_checkpoint(tmp_path / "run" / POINTER_NAME)["hooks"]
    assert "test_loss_ema" in saved
    assert "loss_emahook" not in saved
    assert saved["test_loss_ema"]["average"] > 0


def test_a_name_given_to_the_instance_wins() -> None:
    @register_hook("test_named_twice")
    class Counter(Hook):
        def __init__(self, name: str | None = None) -> None:
            super().__init__(name=name)

    assert (Counter().name, Counter(name="second_counter").name) == (
        "test_named_twice",
        "second_counter",
    )


def test_an_unregistered_subclass_has_its_own_class_name() -> None:
    assert UnregisteredLossEMAHook().name == "unregistered_loss_emahook"


def test_an_unregistered_hook_is_named_after_its_class() -> None:
    class PrintLoss(Hook):
        pass

    assert PrintLoss().name == "print_loss"


def test_registering_a_class_under_a_second_name_is_refused() -> None:
    with pytest.raises(ValueError, match="LossEMAHook is already registered as 'test_loss_ema'"):
        register_hook("test_loss_ema_again")(LossEMAHook)
    assert "test_loss_ema_again" not in HOOKS


def test_registering_the_same_class_under_its_name_again_is_allowed() -> None:
    assert register_hook("test_loss_ema")(LossEMAHook) is LossEMAHook


@pytest.mark.parametrize("registered", HOOKS.names())
def test_every_registered_hook_class_is_named_as_registered(registered: str) -> None:
    assert default_name(HOOKS.get(registered)) == registered


def test_the_default_hooks_keep_the_names_their_checkpoints_use(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", hooks={"tensorboard": {"enabled": True}})
    names = {hook.name for hook in default_hooks(cfg)}
    # the names checkpoints written before the registered name became the hook's name use
    assert {"timing", "checkpoint", "log", "tensorboard", "metrics_json"} <= names

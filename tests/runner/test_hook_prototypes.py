"""PrototypeNormalizationHook and FreezePrototypesHook on the fake engine."""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.config import validate_config
from hookbus.hook_set import method_hook
from hookbus.hooks.methods.freeze_prototypes import FreezePrototypesHook
from hookbus.hooks.methods.prototype_normalization import PrototypeNormalizationHook
from tests.method_parts import small_model


def test_prototypes_are_unit_rows_after_start_and_after_each_update() -> None:
    model = small_model(prototypes=6)
    with torch.no_grad():
        model.prototypes.weight.mul_(3.0)
    engine = FakeEngine(train=True, base_model=model)
    hook = PrototypeNormalizationHook().attach(engine)
    hook.on_start(engine)
    torch.testing.assert_close(model.prototypes.weight.norm(dim=1), torch.ones(6))
    with torch.no_grad():
        model.prototypes.weight.mul_(2.0)
    engine.step()
    torch.testing.assert_close(model.prototypes.weight.norm(dim=1), torch.ones(6))


def test_normalisation_needs_prototypes() -> None:
    engine = FakeEngine(base_model=small_model())
    with pytest.raises(ValueError, match="model.prototypes.count"):
        PrototypeNormalizationHook().on_start(engine)


def with_gradients(model: torch.nn.Module) -> None:
    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)


@pytest.mark.parametrize(
    ("hook", "iteration", "epoch", "frozen"),
    [
        (FreezePrototypesHook(iterations=10), 10, 3, True),  # the 10th train iteration
        (FreezePrototypesHook(iterations=10), 11, 0, False),
        (FreezePrototypesHook(epochs=1), 100, 0, True),
        (FreezePrototypesHook(epochs=1), 5, 1, False),
    ],
)
def test_frozen_prototypes_lose_their_gradients_only(
    hook: FreezePrototypesHook, iteration: int, epoch: int, frozen: bool
) -> None:
    model = small_model(prototypes=3)
    with_gradients(model)
    engine = FakeEngine(train=True, base_model=model, iteration=iteration, train_phase_idx=epoch)
    hook.attach(engine)
    hook.on_backward(engine)
    assert (model.prototypes.weight.grad is None) == frozen
    assert model.head.layers[0].weight.grad is not None


def test_freeze_is_built_by_each_method_from_its_own_setting() -> None:
    swav = validate_config(
        {
            "loss": {"name": "swav", "swav": {"freeze_prototypes_iterations": 7}},
            "model": {"prototypes": {"count": 4}},
        }
    )
    dino = validate_config(
        {
            "loss": {"name": "dino", "dino": {"freeze_last_layer_epochs": 2}},
            "model": {"prototypes": {"count": 4}},
        }
    )
    assert vars(method_hook(swav, "freeze_prototypes"))["iterations"] == 7
    assert vars(method_hook(dino, "freeze_prototypes"))["epochs"] == 2

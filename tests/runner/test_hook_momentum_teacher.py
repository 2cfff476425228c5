"""MomentumTeacherHook on the fake engine: the copy, its forward, the EMA and its state."""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.config import validate_config
from hookbus.hook_set import method_hook
from hookbus.hooks.methods.momentum_teacher import (
    MomentumTeacherHook,
    cosine_momentum,
    linear_momentum,
)
from tests.method_parts import small_model, views_batch


def started(hook: MomentumTeacherHook, **fields) -> FakeEngine:
    engine = FakeEngine(**fields)
    hook.attach(engine)
    hook.on_start(engine)
    return engine


def test_cosine_momentum_rises_from_start_to_final() -> None:
    assert cosine_momentum(0, 100, 0.99, 1.0) == pytest.approx(0.99)
    assert cosine_momentum(50, 100, 0.99, 1.0) == pytest.approx(0.995)
    assert cosine_momentum(100, 100, 0.99, 1.0) == pytest.approx(1.0)
    assert cosine_momentum(150, 100, 0.99, 1.0) == pytest.approx(1.0)


def test_linear_momentum_rises_by_the_same_amount_every_step() -> None:
    steps = [0, 25, 50, 75, 100, 150]
    assert [linear_momentum(i, 100, 0.996, 1.0) for i in steps] == pytest.approx(
        [0.996, 0.997, 0.998, 0.999, 1.0, 1.0]
    )
    # The half cosine starts and ends slower: above the line in the first half, below after.
    assert cosine_momentum(25, 100, 0.996, 1.0) == pytest.approx(0.996 + 0.004 * 0.1464466)
    assert cosine_momentum(75, 100, 0.996, 1.0) == pytest.approx(0.996 + 0.004 * 0.8535534)
    assert linear_momentum(3, 0, 0.9, 1.0) == 1.0  # no train iterations: the final momentum


def moved_teacher(schedule: str, iteration: int, state: dict | None = None) -> dict:
    """The teacher after one update at ``iteration`` of 4, the model 1 away from it."""
    model = small_model()
    hook = MomentumTeacherHook(momentum=0.5, final_momentum=1.0, schedule=schedule)
    if state is not None:
        hook.load_state_dict(state)
    engine = started(hook, base_model=model, iteration=iteration, max_iterations=4)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    hook.on_update(engine)
    return {name: parameter.clone() for name, parameter in hook.teacher.named_parameters()}


@pytest.mark.parametrize(("schedule", "momentum"), [("linear", 0.625), ("cosine", 0.5732233)])
def test_the_update_follows_the_schedule_of_the_global_step(schedule: str, momentum: float) -> None:
    before = dict(small_model().named_parameters())
    after = moved_teacher(schedule, iteration=2)  # step 1 of 4
    for name, parameter in after.items():
        torch.testing.assert_close(parameter, before[name].detach() + (1 - momentum))


def test_a_restored_hook_continues_the_linear_schedule_at_its_step() -> None:
    source = MomentumTeacherHook(schedule="linear")
    started(source, base_model=small_model())
    restored = moved_teacher("linear", iteration=4, state=source.state_dict())  # step 3 of 4
    before = dict(small_model().named_parameters())
    for name, parameter in restored.items():
        torch.testing.assert_close(parameter, before[name].detach() + (1 - 0.875))


def test_an_unknown_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="schedule must be one of cosine, linear, got 'step'"):
        MomentumTeacherHook(schedule="step")  # type: ignore[arg-type]


def test_teacher_is_a_copy_without_predictor_or_gradients() -> None:
    model = small_model(predictor=True)
    hook = MomentumTeacherHook()
    started(hook, base_model=model)
    assert hook.teacher is not model
    assert hook.teacher.predictor is None
    assert not any(p.requires_grad for p in hook.teacher.parameters())
    teacher = hook.teacher.state_dict()
    assert all(torch.equal(teacher[k], v) for k, v in model.state_dict().items() if k in teacher)


def test_forward_writes_teacher_outputs_of_the_first_views() -> None:
    model = small_model(prototypes=5)
    hook = MomentumTeacherHook(views=2)
    engine = started(hook, base_model=model, last_batch=views_batch(views=3), last_output={})
    hook.on_forward(engine)
    output = engine.state.last_output
    assert [e.shape for e in output["teacher_embeddings"]] == [(4, 4), (4, 4)]
    assert [s.shape for s in output["teacher_scores"]] == [(4, 5), (4, 5)]
    assert not output["teacher_embeddings"][0].requires_grad


def test_update_moves_each_parameter_by_one_minus_momentum() -> None:
    model = small_model()
    hook = MomentumTeacherHook(momentum=0.75, final_momentum=0.75)
    engine = started(hook, base_model=model, iteration=3, max_iterations=10)
    before = {k: v.clone() for k, v in hook.teacher.named_parameters()}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    hook.on_update(engine)
    for name, parameter in hook.teacher.named_parameters():
        expected = 0.75 * before[name] + 0.25 * (before[name] + 1.0)
        torch.testing.assert_close(parameter, expected)


def test_state_loaded_before_start_replaces_the_copy_at_start() -> None:
    source = MomentumTeacherHook()
    started(source, base_model=small_model(seed=1))
    saved = source.state_dict()
    restored = MomentumTeacherHook()
    restored.load_state_dict(saved)
    started(restored, base_model=small_model(seed=2))
    for key, value in saved["teacher"].items():
        assert torch.equal(restored.teacher.state_dict()[key], value)


def test_the_dino_entry_builds_it_from_the_method_section() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "dino", "dino": {"momentum": 0.9, "global_views": 2}},
            "model": {"prototypes": {"count": 8}},
        }
    )
    hook = method_hook(cfg, "momentum_teacher")
    assert isinstance(hook, MomentumTeacherHook)
    assert (hook.momentum, hook.final_momentum, hook.views) == (0.9, 1.0, 2)
    assert hook.schedule == "cosine"


def test_the_method_section_sets_the_linear_schedule() -> None:
    cfg = validate_config(
        {
            "loss": {"name": "byol", "byol": {"momentum_schedule": "linear"}},
            "model": {"predictor": {"dims": [64, 32, 64]}},
        }
    )
    hook = method_hook(cfg, "momentum_teacher")
    assert isinstance(hook, MomentumTeacherHook)
    assert hook.schedule == "linear"

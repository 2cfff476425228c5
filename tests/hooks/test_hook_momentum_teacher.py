"""MomentumTeacherHook on the fake engine: the copy, its forward, the EMA and its state."""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.engine.config_io import validate_config
from hookbus.hooks.defaults import method_hook
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook, cosine_momentum
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

"""GramTeacherHook on the fake engine: the refresh schedule, the snapshot of the momentum
teacher, the high-resolution option and the state a resumed run continues from."""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.hooks.methods.gram_teacher import (
    GramTeacherHook,
    refreshes_due,
    resize_patch_grid,
)
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.parts.models.heads import MLPHead, Prototypes
from hookbus.parts.models.masked_distillation import MaskedDistillationModel
from hookbus.parts.models.presets import ViTSizes
from hookbus.parts.models.vit import ViTBackbone

SIZES = ViTSizes(image_size=8, patch_size=4, width=16, depth=1, heads=2, mlp_dim=16)


def model() -> MaskedDistillationModel:
    torch.manual_seed(0)
    return MaskedDistillationModel(
        ViTBackbone(SIZES, in_channels=1), MLPHead([16, 8], False), Prototypes(8, 4, True)
    )


def batch(side: int = 8) -> dict:
    generator = torch.Generator().manual_seed(1)
    return {"views": [torch.randn(2, 1, side, side, generator=generator) for _ in range(2)]}


def started(gram: GramTeacherHook, student: MaskedDistillationModel) -> FakeEngine:
    engine = FakeEngine(base_model=student, max_iterations=100)
    teacher = MomentumTeacherHook(momentum=0.5, final_momentum=0.5, views=2)
    teacher.attach(engine)
    gram.attach(engine)
    teacher.on_start(engine)
    gram.on_start(engine)
    return engine


def forward(engine: FakeEngine, gram: GramTeacherHook, iteration: int, train: bool = True):
    state = engine.state
    state.iteration, state.train = iteration, train
    state.last_batch = batch()
    state.last_output = state.base_model({"views": state.last_batch["views"]})
    gram.on_forward(engine)
    return state.last_output


def test_the_refreshes_follow_the_authors_rule() -> None:
    # After step s (from 0): (s + 1) >= first and (s + 1) % every == 0, at most max.
    assert [refreshes_due(s, 30, 10, None) for s in (0, 28, 29, 38, 39, 99)] == [0, 0, 1, 1, 2, 8]
    assert refreshes_due(99, 30, 10, 3) == 3
    assert refreshes_due(99, 0, 10, None) == 10
    assert refreshes_due(99, 0, 0, None) == 0


def test_before_its_start_the_gram_weight_is_zero_and_no_targets_are_written() -> None:
    gram = GramTeacherHook(start=5)
    engine = started(gram, model())
    output = forward(engine, gram, iteration=5)  # step 4
    assert output["gram_weight"] == 0.0 and "gram_teacher_patch_tokens" not in output
    assert not gram.taken


def test_at_its_start_it_copies_the_teacher_and_scores_the_global_views() -> None:
    student = model()
    gram = GramTeacherHook(start=5, weight=2.0)
    engine = started(gram, student)
    with torch.no_grad():  # the teacher has moved away from the student's init
        for parameter in engine.state.teacher.parameters():
            parameter.add_(0.5)
    output = forward(engine, gram, iteration=6)  # step 5
    assert gram.taken and output["gram_weight"] == 2.0
    for mine, theirs in zip(gram.gram.parameters(), engine.state.teacher.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    images = torch.cat(batch()["views"])
    expected = gram.gram.backbone.tokens(images)[1]
    assert output["gram_teacher_patch_tokens"].shape == output["patch_tokens"].shape == (4, 4, 16)
    torch.testing.assert_close(output["gram_teacher_patch_tokens"], expected)


def test_it_stays_a_snapshot_until_a_refresh_is_due() -> None:
    gram = GramTeacherHook(start=0, every=3, first_update=3, max_updates=1)
    engine = started(gram, model())
    forward(engine, gram, iteration=1)
    taken = [parameter.clone() for parameter in gram.gram.parameters()]
    teacher = engine.state.teacher
    for iteration in (1, 2, 3, 4, 5, 6, 7):  # steps 0..6: a refresh after step 2 only
        with torch.no_grad():
            for parameter in teacher.parameters():
                parameter.add_(1.0)
        engine.state.iteration = iteration
        gram.on_update(engine)
        if iteration == 3:
            refreshed = [parameter.clone() for parameter in teacher.parameters()]
    assert gram.updates == 1
    for mine, theirs, before in zip(gram.gram.parameters(), refreshed, taken, strict=True):
        assert torch.equal(mine, theirs) and not torch.equal(mine, before)


def test_the_high_resolution_teacher_sees_larger_views_resized_to_the_students_grid() -> None:
    gram = GramTeacherHook(start=0, image_size=16, resize="bilinear")
    engine = started(gram, model())
    output = forward(engine, gram, iteration=1)
    images = torch.nn.functional.interpolate(
        torch.cat(batch()["views"]), size=(16, 16), mode="bicubic", align_corners=False
    )
    high = gram.gram.backbone.tokens(images)[1]  # a 4x4 grid
    assert high.shape == (4, 16, 16)
    expected = resize_patch_grid(high, 2, 2, "bilinear")
    torch.testing.assert_close(output["gram_teacher_patch_tokens"], expected)


def test_resizing_a_grid_to_its_own_size_keeps_it() -> None:
    tokens = torch.randn(2, 9, 5)
    torch.testing.assert_close(resize_patch_grid(tokens, 3, 3, "bicubic"), tokens)


def test_a_resumed_hook_continues_with_the_saved_snapshot_and_schedule() -> None:
    gram = GramTeacherHook(start=0, every=2)
    engine = started(gram, model())
    forward(engine, gram, iteration=1)
    engine.state.iteration = 2
    with torch.no_grad():
        for parameter in engine.state.teacher.parameters():
            parameter.mul_(3.0)
    gram.on_update(engine)
    saved = gram.state_dict()
    assert (saved["taken"], saved["updates"]) == (True, 1)
    resumed = GramTeacherHook(start=0, every=2)
    resumed.load_state_dict(saved)
    started(resumed, model())
    assert (resumed.taken, resumed.updates) == (True, 1)
    for mine, theirs in zip(resumed.gram.parameters(), gram.gram.parameters(), strict=True):
        assert torch.equal(mine, theirs)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="resize"):
        GramTeacherHook(resize="nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_updates"):
        GramTeacherHook(max_updates=-1)

"""DinoCenteringHook on the fake engine: temperature schedule, center EMA and state."""

from __future__ import annotations

import pytest
import torch

from hookbus import FakeEngine
from hookbus.hooks.methods.dino_centering import DinoCenteringHook


def test_teacher_temperature_warms_up_linearly_then_stays() -> None:
    hook = DinoCenteringHook(
        teacher_temperature=0.07, warmup_teacher_temperature=0.04, warmup_epochs=4
    )
    temperatures = [hook.temperature(epoch) for epoch in range(6)]
    assert temperatures == pytest.approx([0.04, 0.05, 0.06, 0.07, 0.07, 0.07])


def test_teacher_temperature_reaches_its_final_value_at_the_last_warmup_epoch() -> None:
    hook = DinoCenteringHook(
        teacher_temperature=0.07, warmup_teacher_temperature=0.04, warmup_epochs=30
    )
    assert hook.temperature(0) == 0.04
    assert hook.temperature(29) == 0.07
    assert hook.temperature(30) == 0.07
    expected = torch.linspace(0.04, 0.07, 30, dtype=torch.float64).tolist()
    assert [hook.temperature(epoch) for epoch in range(30)] == pytest.approx(expected)


def test_one_warmup_epoch_uses_the_warmup_temperature_then_the_final_one() -> None:
    hook = DinoCenteringHook(
        teacher_temperature=0.07, warmup_teacher_temperature=0.04, warmup_epochs=1
    )
    assert [hook.temperature(epoch) for epoch in range(3)] == [0.04, 0.07, 0.07]


def test_no_warmup_uses_the_final_temperature_from_the_start() -> None:
    hook = DinoCenteringHook(teacher_temperature=0.07, warmup_teacher_temperature=0.04)
    assert hook.temperature(0) == 0.07


def test_forward_uses_the_train_phase_index_as_the_epoch() -> None:
    hook = DinoCenteringHook(
        teacher_temperature=0.07, warmup_teacher_temperature=0.04, warmup_epochs=30
    )
    engine = FakeEngine(train=False, train_phase_idx=29)
    hook.attach(engine)
    engine.state.last_output = {"teacher_scores": [torch.ones(2, 3)]}
    engine.step()
    assert engine.state.last_output["teacher_temperature"] == 0.07


def test_forward_writes_zero_center_and_temperature_then_updates_the_center() -> None:
    hook = DinoCenteringHook(center_momentum=0.75)
    engine = FakeEngine(train=True, train_phase_idx=0)
    hook.attach(engine)
    scores = [torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[5.0, 6.0], [7.0, 8.0]])]
    engine.state.last_output = {"teacher_scores": scores}
    engine.step()
    output = engine.state.last_output
    assert output["teacher_center"].tolist() == [0.0, 0.0]
    assert output["teacher_temperature"] == pytest.approx(0.04)
    # mean over 4 rows: [4, 5]; center = 0.75 * 0 + 0.25 * mean
    assert hook.center.tolist() == [1.0, 1.25]
    assert output["teacher_center"].tolist() == [0.0, 0.0]


def test_center_is_not_updated_in_test_phases() -> None:
    hook = DinoCenteringHook()
    engine = FakeEngine(train=False)
    hook.attach(engine)
    engine.state.last_output = {"teacher_scores": [torch.ones(2, 3)]}
    engine.step()
    assert hook.center.tolist() == [0.0, 0.0, 0.0]


def test_center_state_round_trip() -> None:
    hook = DinoCenteringHook()
    hook.load_state_dict({"center": torch.tensor([0.5, -0.5])})
    assert hook.state_dict()["center"].tolist() == [0.5, -0.5]
    empty = DinoCenteringHook()
    empty.load_state_dict(DinoCenteringHook().state_dict())
    assert empty.center is None

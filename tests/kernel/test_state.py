"""The run state: fields declared once with their defaults, and the values derived from them."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from ignite.engine import State

from hookbus import FakeEngine, RunState
from hookbus.engine.bus.state import RUN_STATE_FIELDS, RunFields
from tests.hook_stubs import Phase


class CountingTensor(torch.Tensor):
    """A tensor that counts how often it is read on the host with ``float()``."""

    reads = 0

    def __float__(self) -> float:
        CountingTensor.reads += 1
        return super().__float__()


def test_every_field_has_a_type_and_a_meaning() -> None:
    for name, spec in RUN_STATE_FIELDS.items():
        assert spec.type, name
        assert spec.metadata["doc"].strip(), name
    assert list(RUN_STATE_FIELDS) == [spec.name for spec in dataclasses.fields(RunFields)]


def test_a_run_state_is_an_ignite_state_with_the_defaults() -> None:
    state = RunState(iteration=9)
    assert isinstance(state, State)
    assert state.iteration == 9
    assert state.phase_idx == -1
    assert state.epoch == 0
    assert state.meters == [] and state.summary == {}


def test_list_and_dict_defaults_are_not_shared_between_states() -> None:
    first, second = RunState(), RunState()
    first.meters.append("meter")
    first.summary["x"] = 1
    assert second.meters == [] and second.summary == {}


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(TypeError, match="iterations"):
        RunState(iterations=3)


def test_the_engines_carry_a_run_state() -> None:
    assert type(FakeEngine(batches=2).state) is RunState


def test_phase_loss_is_the_mean_loss_of_the_phase() -> None:
    assert FakeEngine(batches=4, loss_sum=torch.tensor(2.0)).state.phase_loss == 0.5
    assert FakeEngine(batches=0, loss_sum=torch.tensor(2.0)).state.phase_loss is None
    assert FakeEngine(batches=3).state.phase_loss is None


def test_phase_loss_reads_the_sum_on_the_host_once_per_value() -> None:
    state = RunState(batches=2, loss_sum=torch.tensor(3.0).as_subclass(CountingTensor))
    CountingTensor.reads = 0
    assert [state.phase_loss, state.phase_loss, state.phase_loss] == [1.5, 1.5, 1.5]
    assert CountingTensor.reads == 1
    state.loss_sum = torch.tensor(5.0).as_subclass(CountingTensor)
    state.batches = 4
    assert state.phase_loss == 1.25
    assert CountingTensor.reads == 2


def test_train_phase_count_counts_the_train_phases_of_the_plan() -> None:
    state = FakeEngine(phases=[Phase(True, 2), Phase(False, 1), Phase(True, 2)]).state
    assert state.train_phase_count == 2

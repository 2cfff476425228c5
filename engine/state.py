"""The run state: the fields hooks and train steps read and write on ``engine.state``.

The trainer and :class:`hookbus.engine.testing.FakeEngine` both lay these fields onto ignite's
``State`` object, so a hook sees the same names in a unit test as in a real run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ignite.engine import State


@dataclass(frozen=True)
class Field:
    """A run-state field: its default (made fresh for each run) and its meaning."""

    default: Callable[[], Any]
    doc: str


def _none() -> None:
    return None


RUN_STATE_FIELDS: dict[str, Field] = {
    "cfg": Field(_none, "the validated config (hookbus.engine.config.Config)"),
    "run_dir": Field(_none, "pathlib.Path of the run directory (checkpoint.dir)"),
    "rank": Field(lambda: 0, "this process's rank"),
    "world_size": Field(lambda: 1, "number of processes"),
    "device": Field(lambda: "cpu", "torch.device the step runs on"),
    "phases": Field(list, "the phase plan: a list of hookbus.engine.phases.Phase"),
    "phase_idx": Field(lambda: -1, "index of the current phase in `phases` (-1 before the first)"),
    "train_phase_idx": Field(lambda: -1, "index of the current or last train phase"),
    "train": Field(lambda: True, "True in a train phase, False in a test phase"),
    "phase_name": Field(lambda: "", "'train' or 'test'"),
    "iteration": Field(lambda: 0, "train steps done in the whole run"),
    "local_iteration_num": Field(lambda: 0, "steps of any phase done by this process"),
    "batches": Field(lambda: 0, "steps done in the current phase"),
    "phase_length": Field(lambda: 0, "steps the current phase will take"),
    "max_iterations": Field(lambda: 0, "train steps in the whole run"),
    "batch_time": Field(list, "seconds per step in the current phase (data wait included)"),
    "data_time": Field(list, "seconds spent waiting for each batch of the current phase"),
    "last_batch": Field(_none, "the batch of the current step, on the device"),
    "last_output": Field(_none, "the model's output of the current step"),
    "loss": Field(_none, "the step's loss, detached and averaged over ranks (a tensor)"),
    "loss_sum": Field(_none, "sum of `loss` over the current phase (a tensor, no sync)"),
    "lr": Field(lambda: 0.0, "learning rate of the first parameter group"),
    "grad_norm": Field(
        _none,
        "global L2 norm of the gradients before clipping, at the last optimizer step (a "
        "tensor, no sync); None unless `optimizer.clip_grad_norm` is set",
    ),
    "model": Field(_none, "the model being trained (DDP-wrapped when distributed)"),
    "base_model": Field(_none, "the model without its DDP wrapper"),
    "loss_fn": Field(_none, "the loss module"),
    "optimizer": Field(_none, "the optimizer"),
    "scaler": Field(_none, "the GradScaler for fp16 autocast, else None"),
    "amp_dtype": Field(_none, "torch dtype of autocast, or None when off"),
    "meters": Field(list, "meters updated each step (hookbus.parts.meters.Meter)"),
    "metrics": Field(dict, "after meter sync: {meter value name: float} of the phase"),
    "data_loaders": Field(dict, "{'train', 'test', 'memory'...: DataLoader}"),
    "hooks": Field(list, "the hooks attached to this run, in attach order"),
    "eta_seconds": Field(lambda: 0.0, "estimated seconds left (timing hook)"),
    "data_wait_fraction": Field(lambda: 0.0, "share of step time spent waiting for data"),
    "exception": Field(_none, "the exception being handled in on_exception"),
    "stop_requested": Field(
        _none, "name of the signal that asked the run to stop after this step, or None"
    ),
    "resumed_from": Field(_none, "path of the checkpoint this run resumed from, or None"),
    "summary": Field(dict, "end-of-run results a hook wants to report"),
}


def init_run_state(state: State, **values: Any) -> State:
    """Set every run-state field on ``state`` to its default, then to ``values``."""
    unknown = set(values) - set(RUN_STATE_FIELDS)
    if unknown:
        raise TypeError(f"unknown run-state fields: {sorted(unknown)}")
    for name, field in RUN_STATE_FIELDS.items():
        setattr(state, name, field.default())
    for name, value in values.items():
        setattr(state, name, value)
    return state

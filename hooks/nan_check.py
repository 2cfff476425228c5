"""The NaN-check hook: stops a run that has become numerically degenerate (a NaN, infinite
or absurdly large loss, or weights or optimizer state holding inf or NaN)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch.distributed.tensor import DTensor

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.phases import phase_label
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.engine.process.distributed import all_reduce_max
from hookbus.parts.config import Config
from hookbus.parts.sharding import local

if TYPE_CHECKING:
    from typing_extensions import Self


class DegenerateTrainingError(FloatingPointError):
    """Training has become numerically degenerate: a loss above ``max_loss``, or weights or
    optimizer state holding inf or NaN; the message names the step and the tensor."""


class NonFiniteLossError(DegenerateTrainingError):
    """The loss of a step was NaN or infinite; the message names the step and the value."""


@dataclass(frozen=True)
class _Step:
    """Where a loss was computed, recorded on the host when the step runs."""

    loss: torch.Tensor
    phase_idx: int
    phase_count: int
    phase_name: str
    train: bool
    step: int
    phase_length: int
    iteration: int

    def describe(self) -> str:
        phase = phase_label(self.phase_idx, self.phase_count)
        where = f"{phase} ({self.phase_name}), step {self.step}/{self.phase_length}"
        if self.train:
            return f"train iteration {self.iteration}, {where}"
        return f"{where}, after train iteration {self.iteration}"


@register_hook("nan_check")
class NanCheckHook(Hook):
    """Stops a run whose loss is NaN, infinite or above ``max_loss``, or whose weights or
    optimizer state hold inf or NaN, before anything degenerate is checkpointed.

    =======================  ===============================================  ===========
    event                    reads                                            writes
    =======================  ===============================================  ===========
    ``on_loss_and_meter``    ``loss``, ``train``, ``iteration``,              --
                             ``batches``, ``phase_idx``, ``phase_name``,
                             ``phase_length``
    ``on_step``              ``stop_requested`` (when set: checks the steps   --
                             not checked yet and the state, before the
                             preemption checkpoint); every
                             ``state_frequency``-th train iteration:
                             ``base_model``, ``optimizer``
    ``on_phase_end``         -- (checks the steps not checked yet; after a    --
                             train phase also ``base_model``, ``optimizer``)
    ``on_end``               ``stopped_by`` (when set: as a stop request)     --
    =======================  ===============================================  ===========

    Reading a loss on the host is a device sync, so the losses are kept (detached
    scalars) and checked with one sync on the step that computes every
    ``check_frequency``-th train iteration (in test phases: every ``check_frequency``-th
    step of the phase), where the log hook reads the loss anyway and before a checkpoint
    at a multiple of it; a phase end, and a step after which a preemption checkpoint is
    due, check what is left, before the phase's results are reported or checkpointed.
    ``check_frequency=1`` checks every step as it happens. A loss is refused when it is
    not finite (:class:`NonFiniteLossError`) or when its magnitude exceeds ``max_loss``
    (:class:`DegenerateTrainingError`: a loss of 1e29 trains on with finite numbers while
    the optimizer's moments overflow). The error names the first bad step: its train
    iteration (1-based: the one being computed in a train phase, the last one done in a
    test phase), phase index and name, step within the phase, and its loss.

    With ``check_state``, every floating-point parameter and buffer of the model and every
    floating-point tensor of the optimizer's state (momentum buffers, Adam moments) is
    checked for inf and NaN after the update of every ``state_frequency``-th train
    iteration (the iteration-checkpoint frequency, from the config), at the end of every
    train phase and before a preemption or stop checkpoint; the error names the first
    bad tensor. Priority -50: first among an event's handlers, so before the checkpoint.

    Example::

        NanCheckHook(check_frequency=10).attach(trainer.engine)
        # NonFiniteLossError: loss is nan at train iteration 13, phase 2 (train), step 3/50
    """

    priority = Priority.HIGH

    def __init__(
        self,
        check_frequency: int = 1,
        *,
        max_loss: float | None = 1e8,
        check_state: bool = True,
        state_frequency: int = 0,
    ) -> None:
        if check_frequency < 1:
            raise ValueError(f"check_frequency must be >= 1, got {check_frequency}")
        if max_loss is not None and not (max_loss > 0 and math.isfinite(max_loss)):
            raise ValueError(f"max_loss must be a positive finite number or None, got {max_loss}")
        if state_frequency < 0:
            raise ValueError(f"state_frequency must be >= 0, got {state_frequency}")
        super().__init__()
        self.check_frequency = check_frequency
        self.max_loss = max_loss
        self.check_state = check_state
        self.state_frequency = state_frequency
        self._pending: list[_Step] = []

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """A check every ``hooks.nan_check.check_frequency`` steps; when that is null, at
        the steps that read the loss anyway (every ``trainer.log_frequency``-th) and at
        every iteration checkpoint (the greatest common divisor of the two), so that no
        per-step host sync is added and no checkpoint holds weights after a bad loss.
        The weights and optimizer state are checked before every iteration checkpoint
        (``checkpoint.iter_frequency``) and at train phase ends."""
        section = cfg.hooks.nan_check
        frequency = section.check_frequency
        if frequency is None:
            frequency = math.gcd(cfg.trainer.log_frequency, cfg.checkpoint.iter_frequency)
        return cls(
            check_frequency=frequency,
            max_loss=section.max_loss,
            check_state=section.check_state,
            state_frequency=cfg.checkpoint.iter_frequency,
        )

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        state = engine.state
        loss = cast(torch.Tensor, state.loss)  # on_loss_and_meter: the step set it
        self._pending.append(_step_of(state, loss))
        step = self._pending[-1]
        if (step.iteration if step.train else step.step) % self.check_frequency == 0:
            self._check_losses()

    def on_step(self, engine: RunEngine) -> None:
        state = engine.state
        if state.stop_requested:
            self._check_losses()
            self._check_tensors(
                engine, f"before the checkpoint after train iteration {state.iteration}"
            )
        elif self.state_frequency and self.every_n_train_iterations(engine, self.state_frequency):
            self._check_tensors(engine, f"after train iteration {state.iteration}")

    def on_phase_end(self, engine: RunEngine) -> None:
        self._check_losses()
        state = engine.state
        if state.train:
            self._check_tensors(
                engine,
                f"at the end of {phase_label(state.phase_idx, len(state.phases))} "
                f"({state.phase_name}), "
                f"train iteration {state.iteration}",
            )

    def on_end(self, engine: RunEngine) -> None:
        state = engine.state
        if getattr(state, "stopped_by", None) is not None:
            self._check_losses()
            self._check_tensors(
                engine, f"when the run stopped after train iteration {state.iteration}"
            )

    def _check_losses(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        losses = torch.stack([step.loss.float() for step in pending])
        finite = torch.isfinite(losses)
        sane = finite if self.max_loss is None else finite & (losses.abs() <= self.max_loss)
        for step, ok, is_finite in zip(pending, sane.tolist(), finite.tolist(), strict=True):
            if ok:
                continue
            if not is_finite:
                raise NonFiniteLossError(f"loss is {float(step.loss)} at {step.describe()}")
            raise DegenerateTrainingError(
                f"loss is {float(step.loss):.4g} at {step.describe()}, beyond "
                f"hooks.nan_check.max_loss={self.max_loss:g}: the run has diverged (a "
                "temperature near 0 or a learning rate too high?)"
            )

    def _check_tensors(self, engine: RunEngine, when: str) -> None:
        if not self.check_state:
            return
        tensors = _model_and_optimizer_tensors(engine.state)
        if not tensors:
            return
        device = tensors[0][1].device
        # 0: finite, 1: inf, 2: NaN; of this rank's shards, the worst over ranks when sharded
        codes = torch.stack(
            [
                torch.where(torch.isnan(local(t)).any(), 2, (~torch.isfinite(local(t))).any()).to(
                    device, torch.int32
                )
                for _, t in tensors
            ]
        )
        if any(isinstance(t, DTensor) for _, t in tensors):
            codes = all_reduce_max(codes)
        for (what, _), code in zip(tensors, codes.tolist(), strict=True):
            if code:
                kind = "NaN" if code == 2 else "inf"
                raise DegenerateTrainingError(f"{what} holds {kind} {when}")


def _step_of(state: RunState, loss: torch.Tensor) -> _Step:
    return _Step(
        loss=loss.detach(),
        phase_idx=state.phase_idx,
        phase_count=len(state.phases),
        phase_name=state.phase_name,
        train=state.train,
        step=state.batches + 1,
        phase_length=state.phase_length,
        iteration=state.iteration,
    )


def _model_and_optimizer_tensors(state: RunState) -> list[tuple[str, torch.Tensor]]:
    """The floating-point weights and buffers of ``state.base_model`` and the tensors of
    ``state.optimizer``'s state, each with a name for an error message."""
    tensors: list[tuple[str, torch.Tensor]] = []
    names: dict[int, str] = {}
    model = getattr(state, "base_model", None)
    if model is not None:
        for name, param in model.named_parameters():
            names[id(param)] = name
            tensors.append((f"weight {name}", param.detach()))
        for name, buffer in model.named_buffers():
            if buffer.is_floating_point():
                tensors.append((f"buffer {name}", buffer))
    optimizer = getattr(state, "optimizer", None)
    if optimizer is not None:
        for group_idx, group in enumerate(optimizer.param_groups):
            for index, param in enumerate(group["params"]):
                owner = names.get(id(param), f"parameter {index} of param group {group_idx}")
                for key, value in optimizer.state.get(param, {}).items():
                    if torch.is_tensor(value) and value.is_floating_point():
                        tensors.append((f"optimizer state '{key}' of {owner}", value))
    return tensors

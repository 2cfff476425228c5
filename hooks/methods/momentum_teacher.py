"""MomentumTeacherHook: an EMA copy of the model (MoCo's key encoder, MoCo v3's momentum
encoder, BYOL's target, DINO's teacher) and its forward pass."""

from __future__ import annotations

import copy
import math
from typing import Any, Literal, get_args

import torch
from torch import nn

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.parts.models.shuffle_bn import shuffled_forward
from hookbus.parts.sharding import is_sharded, load_weights, local, sharded_copy

TEACHER_OUTPUTS = ("embeddings", "scores", "patch_scores")
"""Outputs of the teacher written to ``state.last_output`` as ``teacher_<name>``."""

TEACHER_INPUTS = ("patch_masks",)
"""Outputs of the student passed to the teacher in its batch: iBOT's and DINOv2's masks,
which say where the teacher's patch targets are (the teacher sees the views whole)."""


MomentumRule = Literal["cosine", "linear"]
"""How the EMA momentum rises over the run: on a half cosine, or on a straight line."""


def cosine_momentum(iteration: int, total: int, start: float, final: float) -> float:
    """EMA momentum at train step ``iteration`` of ``total``: ``start`` at step 0,
    rising on a half cosine to ``final`` at step ``total``."""
    progress = min(1.0, iteration / total) if total > 0 else 1.0
    return final - (final - start) * (1 + math.cos(math.pi * progress)) / 2


def linear_momentum(iteration: int, total: int, start: float, final: float) -> float:
    """EMA momentum at train step ``iteration`` of ``total``: ``start`` at step 0,
    rising by ``(final - start) / total`` each step to ``final`` at step ``total``."""
    progress = min(1.0, iteration / total) if total > 0 else 1.0
    return start + (final - start) * progress


MOMENTUM_RULES = {"cosine": cosine_momentum, "linear": linear_momentum}
"""The schedule of each :data:`MomentumRule`."""


@register_hook("momentum_teacher")
class MomentumTeacherHook(Hook):
    """Keeps a teacher network, an exponential moving average of the model's parameters.

    ==================  ==============================================================
    event               what it does
    ==================  ==============================================================
    ``on_start``        builds the teacher: a copy of ``state.base_model`` without its
                        predictor, no gradients, on ``state.device`` (of a sharded
                        model: sharded the same way, from this rank's shards,
                        :func:`hookbus.parts.sharding.sharded_copy`); a teacher loaded
                        from a checkpoint replaces the copy's weights; sets
                        ``state.teacher`` to it
    ``on_forward``      runs the teacher (no gradient, in the phase's train/eval mode,
                        under the run's autocast) on the first ``views`` views of
                        ``state.last_batch`` (all when None), given the student's
                        ``patch_masks`` when it wrote them (iBOT, DINOv2), and writes
                        ``teacher_embeddings``, ``teacher_scores`` (when the model has
                        prototypes) and ``teacher_patch_scores`` (iBOT, DINOv2) into
                        ``state.last_output``; with ``shuffle_bn``
                        in a distributed train phase, on a shuffled share of the global
                        batch (:func:`hookbus.parts.models.shuffle_bn.shuffled_forward`, seeded by
                        ``shuffle_seed`` and ``state.iteration - 1``)
    ``on_update``       ``teacher = m * teacher + (1 - m) * model`` for every parameter,
                        ``m`` = :func:`cosine_momentum` or :func:`linear_momentum`
                        (``schedule``) of ``state.iteration - 1`` and
                        ``state.max_iterations``: a function of the global step, so a
                        resumed run continues the schedule; on a sharded model each
                        rank updates its own shards, nothing is gathered
    ==================  ==============================================================

    The teacher's buffers (BatchNorm statistics) come from its own forward passes.
    State: the teacher's ``state_dict``, in checkpoints under ``momentum_teacher``.
    """

    priority = Priority.METHOD

    def __init__(
        self,
        *,
        momentum: float = 0.99,
        final_momentum: float = 1.0,
        schedule: MomentumRule = "cosine",
        views: int | None = None,
        shuffle_bn: bool = False,
        shuffle_seed: int = 0,
    ) -> None:
        super().__init__()
        if not (0 <= momentum <= 1 and 0 <= final_momentum <= 1):
            raise ValueError(f"momenta must be in [0, 1], got {momentum}, {final_momentum}")
        if schedule not in MOMENTUM_RULES:
            raise ValueError(
                f"schedule must be one of {', '.join(get_args(MomentumRule))}, got {schedule!r}"
            )
        if views is not None and views < 1:
            raise ValueError(f"views must be at least 1 or None, got {views}")
        self.momentum = momentum
        self.final_momentum = final_momentum
        self.schedule = schedule
        self.views = views
        self.shuffle_bn = shuffle_bn
        self.shuffle_seed = shuffle_seed
        self.teacher: nn.Module | None = None
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._loaded: dict[str, Any] | None = None

    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        if is_sharded(state.base_model):
            without = ["predictor"] if getattr(state.base_model, "predictor", None) else []
            teacher = sharded_copy(state.base_model, without=without).requires_grad_(False)
        else:
            teacher = copy.deepcopy(state.base_model)
            if getattr(teacher, "predictor", None) is not None:
                teacher.predictor = None  # type: ignore[assignment]  # the teacher has none
            teacher.requires_grad_(False).to(state.device)
        if self._loaded is not None:
            load_weights(teacher, self._loaded)
            self._loaded = None
        model_parameters = dict(state.base_model.named_parameters())
        self._pairs = [
            (parameter, model_parameters[name]) for name, parameter in teacher.named_parameters()
        ]
        self.teacher = teacher
        state.teacher = teacher

    def on_forward(self, engine: RunEngine) -> None:
        state = engine.state
        teacher = self._require_teacher()
        views = state.last_batch["views"]
        views = views if self.views is None else views[: self.views]
        teacher.train(state.train)
        autocast = torch.autocast(
            device_type=torch.device(state.device).type,
            dtype=state.amp_dtype or torch.float32,
            enabled=state.amp_dtype is not None,
        )
        with torch.no_grad(), autocast:
            if self.shuffle_bn and state.train and state.world_size > 1:
                output = shuffled_forward(
                    teacher, views, seed=self.shuffle_seed, iteration=state.iteration - 1
                )
            else:
                given = state.last_output
                inputs = {key: given[key] for key in TEACHER_INPUTS if key in given}
                output = teacher({"views": views, **inputs})
        for name in TEACHER_OUTPUTS:
            if name in output:
                state.last_output[f"teacher_{name}"] = output[name]

    def on_update(self, engine: RunEngine) -> None:
        state = engine.state
        self._require_teacher()
        momentum = MOMENTUM_RULES[self.schedule](
            state.iteration - 1, state.max_iterations, self.momentum, self.final_momentum
        )
        with torch.no_grad():
            for teacher_parameter, parameter in self._pairs:
                local(teacher_parameter).lerp_(local(parameter.detach()), 1 - momentum)

    def state_dict(self) -> dict[str, Any]:
        """``{"teacher": the teacher's state dict}`` (empty before ``on_start``)."""
        return {"teacher": {} if self.teacher is None else self.teacher.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the teacher now, or at ``on_start`` when it is not built yet."""
        if self.teacher is None:
            self._loaded = state["teacher"]
        else:
            load_weights(self.teacher, state["teacher"])

    def _require_teacher(self) -> nn.Module:
        if self.teacher is None:
            raise RuntimeError("momentum_teacher: the teacher is built at on_start; none yet")
        return self.teacher

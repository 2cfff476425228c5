"""DinoCenteringHook: DINO's center and teacher temperature, applied to the teacher outputs."""

from __future__ import annotations

from typing import Any, cast

import torch

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.process import distributed


@register_hook("dino_centering")
class DinoCenteringHook(Hook):
    """Centering and sharpening of DINO's teacher: the center, an EMA of the teacher's
    mean output, and the teacher temperature with its warm-up.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            moves a center loaded from a checkpoint to ``state.device``
    ``on_forward``          writes ``teacher_center`` (``[K]``, zeros at first) and
                            ``teacher_temperature`` (:meth:`temperature` of
                            ``state.train_phase_idx``) into ``state.last_output``; runs
                            after the teacher (it reads ``teacher_scores``)
    ``on_loss_and_meter``   train phases only: ``center = m * center + (1 - m) * mean``,
                            ``mean`` the teacher scores averaged over the global views
                            and the global batch (summed across ranks)
    ======================  ===========================================================

    With ``centering`` false (DINOv2's Sinkhorn-Knopp targets) it writes the temperature
    only and keeps no center. State: the center, in checkpoints under ``dino_centering``.
    """

    priority = Priority.METHOD + 10

    def __init__(
        self,
        *,
        center_momentum: float = 0.9,
        teacher_temperature: float = 0.04,
        warmup_teacher_temperature: float = 0.04,
        warmup_epochs: int = 0,
        centering: bool = True,
    ) -> None:
        super().__init__()
        if not 0 <= center_momentum < 1:
            raise ValueError(f"center_momentum must be in [0, 1), got {center_momentum}")
        if teacher_temperature <= 0 or warmup_teacher_temperature <= 0 or warmup_epochs < 0:
            raise ValueError("teacher temperatures must be positive and warmup_epochs >= 0")
        self.center_momentum = center_momentum
        self.teacher_temperature = teacher_temperature
        self.warmup_teacher_temperature = warmup_teacher_temperature
        self.warmup_epochs = warmup_epochs
        self.centering = centering
        self.center: torch.Tensor | None = None

    def temperature(self, epoch: int) -> float:
        """Teacher temperature of train phase ``epoch`` (0-based, ``state.train_phase_idx``).

        Epoch ``e < warmup_epochs`` takes ``linspace(warmup_teacher_temperature,
        teacher_temperature, warmup_epochs)[e]``: the warm-up value at epoch 0 and the
        final value exactly at the last warm-up epoch ``warmup_epochs - 1`` (with one
        warm-up epoch, the warm-up value alone); later epochs take
        ``teacher_temperature``. A pure function of the epoch, so a resumed run gets the
        same values.
        """
        epoch = max(epoch, 0)
        last = self.warmup_epochs - 1
        if epoch >= self.warmup_epochs or (epoch == last and epoch > 0):
            return self.teacher_temperature
        start = self.warmup_teacher_temperature
        if epoch == 0:
            return start
        return start + (self.teacher_temperature - start) * epoch / last

    def on_start(self, engine: RunEngine) -> None:
        if self.center is not None:
            self.center = self.center.to(engine.state.device)

    def on_forward(self, engine: RunEngine) -> None:
        output = engine.state.last_output
        if "teacher_scores" not in output:
            raise KeyError("dino_centering needs output['teacher_scores'] (momentum_teacher hook)")
        output["teacher_temperature"] = self.temperature(engine.state.train_phase_idx)
        if not self.centering:
            return
        if self.center is None:
            scores = output["teacher_scores"][0]
            self.center = torch.zeros(scores.shape[1], device=scores.device)
        output["teacher_center"] = self.center

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        if not engine.state.train or not self.centering:
            return
        scores = torch.cat(engine.state.last_output["teacher_scores"]).detach().float()
        total = distributed.all_reduce_sum(scores.sum(dim=0))
        mean = total / (len(scores) * distributed.world_size())
        momentum = self.center_momentum
        center = cast(torch.Tensor, self.center)  # on_forward set it
        self.center = center * momentum + mean * (1 - momentum)

    def state_dict(self) -> dict[str, Any]:
        """``{"center": [K]}`` (an empty tensor before the first step)."""
        return {"center": torch.empty(0) if self.center is None else self.center}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the center."""
        center = state["center"]
        self.center = center if center.numel() else None

"""PatchCenteringHook: the running center of the teacher's patch scores (iBOT; DINOv2
with ``loss.dinov2.centering`` centering)."""

from __future__ import annotations

from typing import Any

import torch

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.process import distributed


@register_hook("patch_centering")
class PatchCenteringHook(Hook):
    """Centering of the teacher's masked-patch scores: an EMA of their mean.

    ======================  ===========================================================
    event                   what it does
    ======================  ===========================================================
    ``on_start``            moves a center loaded from a checkpoint to ``state.device``
    ``on_forward``          writes ``teacher_patch_center`` (``[K']``, zeros at first)
                            into ``state.last_output``; runs after the teacher (it
                            reads ``teacher_patch_scores``, ``[M, K']``)
    ``on_loss_and_meter``   train phases only: ``center = m * center + (1 - m) * mean``,
                            ``mean`` the teacher's scores averaged over the masked
                            patches of every rank (sums and counts all-reduced); a step
                            with no masked patch on any rank leaves it
    ======================  ===========================================================

    The mean runs over the masked patches, as DINOv2's code centers them; iBOT's code
    averages over every patch of the global views, which the teacher here does not
    score (it scores the masked places only). State: the center, in checkpoints under
    ``patch_centering``.
    """

    priority = Priority.METHOD + 10

    def __init__(self, *, center_momentum: float = 0.9) -> None:
        super().__init__()
        if not 0 <= center_momentum < 1:
            raise ValueError(f"center_momentum must be in [0, 1), got {center_momentum}")
        self.center_momentum = center_momentum
        self.center: torch.Tensor | None = None

    def on_start(self, engine: RunEngine) -> None:
        if self.center is not None:
            self.center = self.center.to(engine.state.device)

    def on_forward(self, engine: RunEngine) -> None:
        output = engine.state.last_output
        if "teacher_patch_scores" not in output:
            raise KeyError(
                "patch_centering needs output['teacher_patch_scores'] (momentum_teacher hook "
                "on an iBOT or DINOv2 model)"
            )
        if self.center is None:
            scores = output["teacher_patch_scores"]
            self.center = torch.zeros(scores.shape[1], device=scores.device)
        output["teacher_patch_center"] = self.center

    def on_loss_and_meter(self, engine: RunEngine) -> None:
        if not engine.state.train:
            return
        scores = engine.state.last_output["teacher_patch_scores"].detach().float()
        total = torch.cat([scores.sum(dim=0), scores.new_tensor([len(scores)])])
        total = distributed.all_reduce_sum(total)
        count = total[-1]
        mean = total[:-1] / count.clamp(min=1)
        # No masked patch anywhere: momentum 1, the center stays (no host read to check).
        momentum = torch.where(count > 0, self.center_momentum, 1.0)
        center = torch.zeros_like(mean) if self.center is None else self.center
        self.center = center * momentum + mean * (1 - momentum)

    def state_dict(self) -> dict[str, Any]:
        """``{"center": [K']}`` (an empty tensor before the first step)."""
        return {"center": torch.empty(0) if self.center is None else self.center}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the center."""
        center = state["center"]
        self.center = center if center.numel() else None

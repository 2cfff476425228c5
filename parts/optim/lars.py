"""LARS: SGD with momentum whose step is scaled per parameter tensor by a trust ratio."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class LARS(torch.optim.Optimizer):
    """Layer-wise adaptive rate scaling (You, Gitman and Ginsburg, 2017), as the large-batch
    SimCLR, BYOL, SwAV and Barlow Twins recipes use it.

    For each parameter tensor ``w`` with gradient ``g``, in a group whose ``adapt`` is
    true: ``d = g + weight_decay * w``, then ``d *= trust_coefficient * |w| / |d|`` when
    both norms are positive, then ``buf = momentum * buf + d`` and ``w -= lr * buf``. In a
    group whose ``adapt`` is false (biases and normalisation weights, see
    :func:`hookbus.parts.optim.parameter_groups`) the same step runs without the trust ratio;
    such a group usually has ``weight_decay`` 0. The momentum buffers are the only
    state, so a checkpoint of ``state_dict()`` loads with ``weights_only=True``.

    Example::

        groups = parameter_groups(model, weight_decay=1e-6, adapt=True)
        optimizer = LARS(groups, lr=0.3, momentum=0.9)
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = 0.001,
        adapt: bool = True,
    ) -> None:
        if lr <= 0:
            raise ValueError(f"LARS: lr must be positive, got {lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"LARS: momentum must be in [0, 1), got {momentum}")
        if trust_coefficient <= 0:
            raise ValueError(f"LARS: trust_coefficient must be positive, got {trust_coefficient}")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "weight_decay": weight_decay,
            "trust_coefficient": trust_coefficient,
            "adapt": adapt,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()``'s loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                direction = param.grad
                if group["weight_decay"]:
                    direction = direction.add(param, alpha=group["weight_decay"])
                if group["adapt"]:
                    direction = direction * _trust_ratio(
                        param, direction, group["trust_coefficient"]
                    )
                state = self.state[param]
                buffer = state.get("momentum_buffer")
                if buffer is None:
                    buffer = state["momentum_buffer"] = direction.detach().clone()
                else:
                    buffer.mul_(group["momentum"]).add_(direction)
                param.add_(buffer, alpha=-group["lr"])
        return loss


def _trust_ratio(param: torch.Tensor, direction: torch.Tensor, coefficient: float) -> torch.Tensor:
    """``coefficient * |param| / |direction|``, or 1 when either norm is 0 (a tensor, so
    the step never reads a value on the host)."""
    param_norm = torch.linalg.vector_norm(param)
    direction_norm = torch.linalg.vector_norm(direction)
    usable = (param_norm > 0) & (direction_norm > 0)
    ratio = coefficient * param_norm / direction_norm.clamp_min(torch.finfo(param.dtype).tiny)
    return torch.where(usable, ratio, torch.ones_like(ratio))

"""The float precision losses compute in."""

from __future__ import annotations

import torch
from torch import Tensor


def at_least_float32(tensor: Tensor) -> Tensor:
    """``tensor`` in float32, or in its own dtype when that is wider (float64)."""
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))

"""Self-supervised losses, called as ``loss(model_output, batch)``."""

from __future__ import annotations

from engine.losses.build import LOSSES, build_loss, build_nt_xent
from engine.losses.nt_xent import NTXentLoss

__all__ = ["LOSSES", "NTXentLoss", "build_loss", "build_nt_xent"]

"""Losses, called as ``loss(model_output, batch)``: one per SSL method, and linear eval's."""

from __future__ import annotations

from engine.losses.barlow_twins import BarlowTwinsLoss
from engine.losses.build import LOSSES, build_loss, build_nt_xent
from engine.losses.byol import ByolLoss
from engine.losses.cross_entropy import ClassificationLoss
from engine.losses.dino import DinoLoss, teacher_targets
from engine.losses.moco import MocoLoss
from engine.losses.nt_xent import NTXentLoss
from engine.losses.sinkhorn import sinkhorn
from engine.losses.swav import SwavLoss

__all__ = [
    "LOSSES",
    "BarlowTwinsLoss",
    "ByolLoss",
    "ClassificationLoss",
    "DinoLoss",
    "MocoLoss",
    "NTXentLoss",
    "SwavLoss",
    "build_loss",
    "build_nt_xent",
    "sinkhorn",
    "teacher_targets",
]

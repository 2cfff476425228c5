"""Losses, called as ``loss(model_output, batch)``: one per SSL method, and linear eval's."""

from __future__ import annotations

from hookbus.parts.losses.barlow_twins import BarlowTwinsLoss
from hookbus.parts.losses.build import LOSSES, build_loss, build_nt_xent
from hookbus.parts.losses.byol import ByolLoss
from hookbus.parts.losses.cross_entropy import ClassificationLoss
from hookbus.parts.losses.dino import DinoLoss, teacher_targets
from hookbus.parts.losses.lejepa import LejepaLoss
from hookbus.parts.losses.mae import MaeLoss
from hookbus.parts.losses.moco import MocoLoss
from hookbus.parts.losses.moco_v3 import MocoV3Loss
from hookbus.parts.losses.nnclr import NnclrLoss
from hookbus.parts.losses.nt_xent import NTXentLoss
from hookbus.parts.losses.simsiam import SimsiamLoss
from hookbus.parts.losses.sinkhorn import sinkhorn
from hookbus.parts.losses.swav import SwavLoss
from hookbus.parts.losses.vicreg import VicregLoss

__all__ = [
    "LOSSES",
    "BarlowTwinsLoss",
    "ByolLoss",
    "ClassificationLoss",
    "DinoLoss",
    "LejepaLoss",
    "MaeLoss",
    "MocoLoss",
    "MocoV3Loss",
    "NTXentLoss",
    "NnclrLoss",
    "SimsiamLoss",
    "SwavLoss",
    "VicregLoss",
    "build_loss",
    "build_nt_xent",
    "sinkhorn",
    "teacher_targets",
]

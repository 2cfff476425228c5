"""Build the loss of a run from its config; losses are chosen by name."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from hookbus.engine.methods.entries import METHODS, SHARED_PARTS
from hookbus.engine.registry import Registry
from hookbus.parts.config import Config, MethodLossConfig
from hookbus.parts.losses.barlow_twins import BarlowTwinsLoss
from hookbus.parts.losses.byol import ByolLoss
from hookbus.parts.losses.cross_entropy import ClassificationLoss
from hookbus.parts.losses.dino import DinoLoss
from hookbus.parts.losses.distillation import DistillationLoss
from hookbus.parts.losses.gram import Dinov3Loss
from hookbus.parts.losses.ijepa import IjepaLoss
from hookbus.parts.losses.lejepa import LejepaLoss
from hookbus.parts.losses.mae import MaeLoss
from hookbus.parts.losses.masked_distillation import MaskedDistillationLoss
from hookbus.parts.losses.moco import MocoLoss
from hookbus.parts.losses.moco_v3 import MocoV3Loss
from hookbus.parts.losses.nnclr import NnclrLoss
from hookbus.parts.losses.nt_xent import NTXentLoss
from hookbus.parts.losses.simsiam import SimsiamLoss
from hookbus.parts.losses.swav import SwavLoss
from hookbus.parts.losses.vicreg import VicregLoss

LossBuilder = Callable[[MethodLossConfig], nn.Module]
"""A loss builder: ``(cfg.loss) -> loss module``."""

MODEL_PARTS = tuple(SHARED_PARTS)
"""The optional parts of the SSL model, each read by some losses only: the predictor's
``predictions`` and the prototypes' ``scores``."""


class LossRegistry(Registry[LossBuilder]):
    """The loss registry; the loss of an SSL method reads the model parts that the
    method's entry (``hookbus.methods``) states, looked up when asked (the entries are
    registered by the time a config is validated, after this module is imported)."""

    def __init__(self) -> None:
        super().__init__("loss", readable=MODEL_PARTS)
        self._methods: set[str] = set()

    def reads(self, name: str) -> tuple[str, ...] | None:
        """The optional model parts the loss ``name`` reads, or None when it did not say;
        for a method's loss, those of its entry (UnknownNameError when it has none)."""
        if name in self._methods:
            return tuple(part for part in METHODS.get(name).parts if part in MODEL_PARTS)
        return super().reads(name)

    def readers(self, key: str) -> list[str]:
        """The losses that read the model part ``key``."""
        return [name for name in self.names() if key in (self.reads(name) or (key,))]

    def register_method(self, name: str) -> Callable[[LossBuilder], LossBuilder]:
        """Decorator registering the loss of the SSL method ``name``."""
        self._methods.add(name)
        return self.register(name)


LOSSES = LossRegistry()
"""Builders ``(cfg.loss) -> loss module``, chosen by ``loss.name``. A loss module is
called as ``loss(output, batch)`` and returns a scalar tensor. A builder registered with
the optional model parts its loss reads (``reads``, of :data:`MODEL_PARTS`) has the
other parts refused when a config sets them (``model.predictor.dims``,
``model.prototypes.count``)."""


def register_method_loss(name: str) -> Callable[[LossBuilder], LossBuilder]:
    """Decorator registering the loss of the SSL method ``name``, which reads the model
    parts that the method's entry (``hookbus.methods``) states."""
    return LOSSES.register_method(name)


@register_method_loss("nt_xent")
def build_nt_xent(cfg: MethodLossConfig) -> NTXentLoss:
    """:class:`NTXentLoss` (SimCLR) at ``loss.temperature``."""
    return NTXentLoss(cfg.temperature)


@register_method_loss("moco")
def build_moco(cfg: MethodLossConfig) -> MocoLoss:
    """:class:`MocoLoss` at ``loss.moco.temperature``."""
    return MocoLoss(cfg.moco.temperature)


@register_method_loss("moco_v3")
def build_moco_v3(cfg: MethodLossConfig) -> MocoV3Loss:
    """:class:`MocoV3Loss` at ``loss.moco_v3.temperature``."""
    return MocoV3Loss(cfg.moco_v3.temperature)


@register_method_loss("byol")
def build_byol(cfg: MethodLossConfig) -> ByolLoss:
    """:class:`ByolLoss` (no settings)."""
    return ByolLoss()


@register_method_loss("swav")
def build_swav(cfg: MethodLossConfig) -> SwavLoss:
    """:class:`SwavLoss` from ``loss.swav``."""
    swav = cfg.swav
    return SwavLoss(swav.temperature, swav.epsilon, swav.sinkhorn_iterations, swav.assign_views)


@register_method_loss("dino")
def build_dino(cfg: MethodLossConfig) -> DinoLoss:
    """:class:`DinoLoss` at ``loss.dino.student_temperature``."""
    return DinoLoss(cfg.dino.student_temperature)


@register_method_loss("dinov2")
def build_dinov2(cfg: MethodLossConfig) -> MaskedDistillationLoss:
    """:class:`MaskedDistillationLoss` of DINOv2: ``loss.dino.student_temperature``,
    ``loss.ibot.loss_weight``, ``loss.dinov2`` (centering, Sinkhorn-Knopp iterations,
    KoLeo weight)."""
    return MaskedDistillationLoss(
        cfg.dino.student_temperature,
        centering=cfg.dinov2.centering,
        sinkhorn_iterations=cfg.dinov2.sinkhorn_iterations,
        patch_weight=cfg.ibot.loss_weight,
        koleo_weight=cfg.dinov2.koleo_weight,
    )


@register_method_loss("dinov3")
def build_dinov3(cfg: MethodLossConfig) -> Dinov3Loss:
    """:class:`Dinov3Loss`: DINOv2's (``loss.dino``, ``loss.ibot``, ``loss.dinov2``) plus
    the Gram loss of ``loss.dinov3``."""
    return Dinov3Loss(
        cfg.dino.student_temperature,
        centering=cfg.dinov2.centering,
        sinkhorn_iterations=cfg.dinov2.sinkhorn_iterations,
        patch_weight=cfg.ibot.loss_weight,
        koleo_weight=cfg.dinov2.koleo_weight,
        normalize=cfg.dinov3.gram_normalize,
        negatives=cfg.dinov3.gram_negatives,
    )


@register_method_loss("ibot")
def build_ibot(cfg: MethodLossConfig) -> MaskedDistillationLoss:
    """:class:`MaskedDistillationLoss` of iBOT: running centers, no KoLeo;
    ``loss.dino.student_temperature``, ``loss.ibot.loss_weight``."""
    return MaskedDistillationLoss(
        cfg.dino.student_temperature,
        centering="centering",
        patch_weight=cfg.ibot.loss_weight,
        koleo_weight=0.0,
    )


@register_method_loss("barlow_twins")
def build_barlow_twins(cfg: MethodLossConfig) -> BarlowTwinsLoss:
    """:class:`BarlowTwinsLoss` from ``loss.barlow_twins``."""
    return BarlowTwinsLoss(cfg.barlow_twins.lambd, cfg.barlow_twins.eps)


@register_method_loss("vicreg")
def build_vicreg(cfg: MethodLossConfig) -> VicregLoss:
    """:class:`VicregLoss` from ``loss.vicreg``."""
    vicreg = cfg.vicreg
    return VicregLoss(vicreg.sim_coeff, vicreg.std_coeff, vicreg.cov_coeff)


@register_method_loss("simsiam")
def build_simsiam(cfg: MethodLossConfig) -> SimsiamLoss:
    """:class:`SimsiamLoss` (no settings)."""
    return SimsiamLoss()


@register_method_loss("nnclr")
def build_nnclr(cfg: MethodLossConfig) -> NnclrLoss:
    """:class:`NnclrLoss` at ``loss.nnclr.temperature``."""
    return NnclrLoss(cfg.nnclr.temperature)


@register_method_loss("mae")
def build_mae(cfg: MethodLossConfig) -> MaeLoss:
    """:class:`MaeLoss` with ``loss.mae.norm_pix_loss`` (the mask ratio is the model's)."""
    return MaeLoss(cfg.mae.norm_pix_loss)


@register_method_loss("distillation")
def build_distillation(cfg: MethodLossConfig) -> DistillationLoss:
    """:class:`DistillationLoss` of ``loss.distillation`` (mode, temperature, dense weight)."""
    section = cfg.distillation
    return DistillationLoss(section.mode, section.temperature, section.dense_weight)


@register_method_loss("ijepa")
def build_ijepa(cfg: MethodLossConfig) -> IjepaLoss:
    """:class:`IjepaLoss` with ``loss.ijepa.distance`` (the masks are the collate's)."""
    return IjepaLoss(cfg.ijepa.distance)


@register_method_loss("lejepa")
def build_lejepa(cfg: MethodLossConfig) -> LejepaLoss:
    """:class:`LejepaLoss` from ``loss.lejepa``."""
    lejepa = cfg.lejepa
    return LejepaLoss(
        lejepa.sigreg_weight, lejepa.global_views, lejepa.slices, lejepa.knots, lejepa.t_max
    )


@LOSSES.register("cross_entropy", ())
def build_cross_entropy(cfg: MethodLossConfig) -> ClassificationLoss:
    """:class:`ClassificationLoss` (linear evaluation, fine-tuning) with
    ``loss.cross_entropy.label_smoothing``."""
    return ClassificationLoss(cfg.cross_entropy.label_smoothing)


def build_loss(cfg: Config) -> nn.Module:
    """The loss named by ``loss.name``."""
    return LOSSES.get(cfg.loss.name)(cfg.loss)

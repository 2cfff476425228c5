"""The whole config: the kernel's sections (:mod:`hookbus.engine.config`) with each shipped
SSL method's settings, declared here field by field (``loss.<method>``, a method's own
``model.<part>``), so a type checker sees ``cfg.loss.dino.teacher_temperature`` where it is
read and a misspelt setting fails it. Nothing is assembled at import: the settings are
the classes of :mod:`hookbus.parts.settings`. A recipe is read into this schema by
:func:`hookbus.config.load_config`, which also registers the method entries whose rules
the validation applies (``hookbus.methods``)."""

from __future__ import annotations

from pydantic import Field

from hookbus.engine.config import Config as KernelConfig
from hookbus.engine.config import LossConfig, LossName, ModelConfig, ModelParts
from hookbus.parts.settings.barlow_twins import BarlowTwinsConfig
from hookbus.parts.settings.byol import ByolConfig
from hookbus.parts.settings.dino import DinoConfig
from hookbus.parts.settings.dinov2 import Dinov2Config
from hookbus.parts.settings.dinov3 import Dinov3Config
from hookbus.parts.settings.distillation import DistillationConfig
from hookbus.parts.settings.ibot import IbotConfig
from hookbus.parts.settings.ijepa import IjepaConfig, IjepaPredictorConfig
from hookbus.parts.settings.lejepa import LejepaConfig
from hookbus.parts.settings.mae import MaeConfig, MaeDecoderConfig
from hookbus.parts.settings.moco import MocoConfig
from hookbus.parts.settings.moco_v3 import MocoV3Config
from hookbus.parts.settings.nnclr import NnclrConfig
from hookbus.parts.settings.swav import SwavConfig
from hookbus.parts.settings.vicreg import VicregConfig

DEFAULT_LOSS = "nt_xent"
"""The loss (and method, SimCLR) of a config that names none."""

LOSS_NAMES = (
    "nt_xent (SimCLR), moco, moco_v3, byol, swav, dino, dinov2, dinov3, ibot, barlow_twins, "
    "vicreg, simsiam, nnclr, mae, ijepa (I-JEPA), lejepa, distillation, cross_entropy "
    "(linear eval, fine-tuning)"
)
"""The ``loss.name`` values, for its description (a test holds it to the method entries)."""


class MethodLosses(LossName):
    """The methods' settings in ``loss``, in the methods' order."""

    temperature: float = Field(0.5, ge=1e-3, le=100, description="softmax temperature (nt_xent)")
    moco: MocoConfig = Field(default_factory=MocoConfig)
    moco_v3: MocoV3Config = Field(default_factory=MocoV3Config)
    byol: ByolConfig = Field(default_factory=ByolConfig)
    swav: SwavConfig = Field(default_factory=SwavConfig)
    dino: DinoConfig = Field(default_factory=DinoConfig)
    dinov2: Dinov2Config = Field(default_factory=Dinov2Config)
    dinov3: Dinov3Config = Field(default_factory=Dinov3Config)
    ibot: IbotConfig = Field(default_factory=IbotConfig)
    barlow_twins: BarlowTwinsConfig = Field(default_factory=BarlowTwinsConfig)
    vicreg: VicregConfig = Field(default_factory=VicregConfig)
    nnclr: NnclrConfig = Field(default_factory=NnclrConfig)
    mae: MaeConfig = Field(default_factory=MaeConfig)
    ijepa: IjepaConfig = Field(default_factory=IjepaConfig)
    lejepa: LejepaConfig = Field(default_factory=LejepaConfig)
    distillation: DistillationConfig = Field(default_factory=DistillationConfig)


class MethodLossConfig(LossConfig, MethodLosses):
    """``loss``: its name, the methods' settings, then the classifier's."""

    name: str = Field(
        DEFAULT_LOSS,
        description="loss, by its registered name; it selects the method and its hooks: "
        + LOSS_NAMES,
    )


class MethodModels(ModelParts):
    """The model parts that only one method builds (``model.<part>``)."""

    mae_decoder: MaeDecoderConfig = Field(
        default_factory=MaeDecoderConfig, description="loss.name mae: the decoder's sizes"
    )
    ijepa_predictor: IjepaPredictorConfig = Field(
        default_factory=IjepaPredictorConfig,
        description="loss.name ijepa: the predictor's sizes",
    )


class MethodModelConfig(ModelConfig, MethodModels):
    """``model``: the shared parts, the methods' own parts, then how the model runs."""


class Config(KernelConfig):
    """The whole trainer config. Every section has defaults; a recipe sets what differs."""

    model: MethodModelConfig = Field(default_factory=MethodModelConfig)
    loss: MethodLossConfig = Field(default_factory=MethodLossConfig)


def method_config(cfg: KernelConfig) -> Config:
    """``cfg`` as the whole config, for code that holds it by the kernel's type (the run
    state's ``cfg``); every config hookbus reads is one. TypeError for a config of the
    kernel's sections alone."""
    if not isinstance(cfg, Config):
        raise TypeError(
            f"a {type(cfg).__name__} has no method settings: read configs with "
            "hookbus.config.load_config"
        )
    return cfg

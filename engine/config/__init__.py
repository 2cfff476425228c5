"""The trainer config: pydantic models that reject unknown keys and wrong types.

One module per section (``trainer``, ``data``, ``model`` with ``evaluation``, ``loss``,
``optimizer``, ``meters``, ``checkpoint``, ``hooks``, ``distributed``, ``machine``) and the
whole :class:`Config` in ``root``: the kernel's sections. The whole config with each SSL
method's settings (``loss.<method>``, ``model.<part>``) is declared, field by field, in
``hookbus.parts.config``, which names the methods.

The config's room also holds reading a recipe (``config_io``, ``yaml_safety``,
``recipe_names``, ``imports``), the backbone's names (``model_names``) and what may change
when a run resumes (``config_changes``).
"""

from __future__ import annotations

from hookbus.engine.config.backbone import BackboneConfig, ViTConfig
from hookbus.engine.config.checkpoint import CheckpointConfig
from hookbus.engine.config.data import (
    AugmentConfig,
    DataConfig,
    ImageFolderConfig,
    ShardsConfig,
    SmallViewsConfig,
    SyntheticDataConfig,
    TorchvisionAugmentConfig,
    ViewAugmentConfig,
)
from hookbus.engine.config.distributed import DistributedConfig
from hookbus.engine.config.evaluation import (
    FineTuneConfig,
    LinearEvalConfig,
)
from hookbus.engine.config.hooks import (
    EnabledHook,
    EvaluationReportConfig,
    ExtraHookConfig,
    HooksConfig,
    MlflowConfig,
    NanCheckConfig,
    OnlineProbeConfig,
    WandbConfig,
)
from hookbus.engine.config.loss import (
    CLASSIFIER_LOSS,
    ClassifierLoss,
    CrossEntropyConfig,
    LossConfig,
    LossName,
)
from hookbus.engine.config.machine import MachineConfig
from hookbus.engine.config.meters import (
    AccuracyMeterConfig,
    CollapseMeterConfig,
    KnnMeterConfig,
    MetersConfig,
)
from hookbus.engine.config.model import (
    AmpConfig,
    CompileConfig,
    CudaCacheConfig,
    HeadConfig,
    ModelConfig,
    ModelParts,
    ModelRuntime,
    PredictorConfig,
    PrototypesConfig,
)
from hookbus.engine.config.optimizer import OptimizerConfig
from hookbus.engine.config.root import (
    Config,
    FromPythonConfig,
)
from hookbus.engine.config.trainer import TrainerConfig
from hookbus.engine.section import MAX_PIXELS, Decay, MomentumSchedule, Positive, Section, Size

__all__ = [
    "CLASSIFIER_LOSS",
    "MAX_PIXELS",
    "AccuracyMeterConfig",
    "AmpConfig",
    "AugmentConfig",
    "BackboneConfig",
    "CheckpointConfig",
    "ClassifierLoss",
    "CollapseMeterConfig",
    "CompileConfig",
    "Config",
    "CrossEntropyConfig",
    "CudaCacheConfig",
    "DataConfig",
    "Decay",
    "DistributedConfig",
    "EnabledHook",
    "EvaluationReportConfig",
    "ExtraHookConfig",
    "FineTuneConfig",
    "FromPythonConfig",
    "HeadConfig",
    "HooksConfig",
    "ImageFolderConfig",
    "KnnMeterConfig",
    "LinearEvalConfig",
    "LossConfig",
    "LossName",
    "MachineConfig",
    "MetersConfig",
    "MlflowConfig",
    "ModelConfig",
    "ModelParts",
    "ModelRuntime",
    "MomentumSchedule",
    "NanCheckConfig",
    "OnlineProbeConfig",
    "OptimizerConfig",
    "Positive",
    "PredictorConfig",
    "PrototypesConfig",
    "Section",
    "ShardsConfig",
    "Size",
    "SmallViewsConfig",
    "SyntheticDataConfig",
    "TorchvisionAugmentConfig",
    "TrainerConfig",
    "ViTConfig",
    "ViewAugmentConfig",
    "WandbConfig",
]

"""The default hook set a config asks for."""

from __future__ import annotations

from hookbus.engine.config import Config
from hookbus.engine.errors import ConfigError
from hookbus.engine.hook import Hook
from hookbus.engine.registry import UnknownNameError
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.cuda_cache import CudaCacheHook
from hookbus.hooks.evaluation_report import EvaluationReportHook
from hookbus.hooks.log import LogHook
from hookbus.hooks.meter_sync import MeterSyncHook
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.freeze_prototypes import FreezePrototypesHook
from hookbus.hooks.methods.key_queue import KeyQueueHook
from hookbus.hooks.methods.momentum_teacher import MomentumTeacherHook
from hookbus.hooks.methods.nnclr_support import NnclrSupportHook
from hookbus.hooks.methods.patch_centering import PatchCenteringHook
from hookbus.hooks.methods.prototype_normalization import PrototypeNormalizationHook
from hookbus.hooks.methods.swav_queue import SwavQueueHook
from hookbus.hooks.metrics_json import MetricsJsonHook
from hookbus.hooks.mlflow_tracker import MlflowHook
from hookbus.hooks.nan_check import NanCheckHook
from hookbus.hooks.online_probe import OnlineProbeHook
from hookbus.hooks.progress_bar import ProgressBarHook
from hookbus.hooks.registry import HOOKS
from hookbus.hooks.summary_plot import SummaryPlotHook
from hookbus.hooks.tensorboard import TensorBoardHook
from hookbus.hooks.timing import TimingHook
from hookbus.hooks.wandb_tracker import WandbHook


def default_hooks(cfg: Config) -> list[Hook]:
    """The hooks a run of ``cfg`` uses when none are given, in attach order.

    Always: timing, meter sync, checkpoint; the hooks of the method that ``loss.name``
    selects (:func:`method_hooks`). Each of log, progress bar, metrics.json,
    TensorBoard, summary plot and NaN check when its ``hooks.<name>.enabled``; CUDA cache clearing
    when ``model.cuda_cache.clear_cuda_cache``; the evaluation report when
    ``hooks.evaluation_report.enabled``; the online linear probe when
    ``hooks.online_probe.enabled``; the W&B and MLflow trackers when
    ``hooks.wandb.enabled`` and ``hooks.mlflow.enabled`` (a ConfigError naming the extra
    to install when their package is missing); then every ``hooks.extra`` entry, built by name
    with its ``params``.
    """
    section = cfg.hooks
    hooks: list[Hook] = [TimingHook.from_config(cfg), MeterSyncHook(), *method_hooks(cfg)]
    if section.nan_check.enabled:
        hooks.append(NanCheckHook.from_config(cfg))
    if section.log.enabled:
        hooks.append(LogHook.from_config(cfg))
    if section.progress_bar.enabled:
        hooks.append(ProgressBarHook.from_config(cfg))
    if section.metrics_json.enabled:
        hooks.append(MetricsJsonHook.from_config(cfg))
    if section.tensorboard.enabled:
        hooks.append(TensorBoardHook.from_config(cfg))
    if section.summary_plot.enabled:
        hooks.append(SummaryPlotHook.from_config(cfg))
    if cfg.model.cuda_cache.clear_cuda_cache:
        hooks.append(CudaCacheHook.from_config(cfg))
    if section.evaluation_report.enabled:
        hooks.append(EvaluationReportHook.from_config(cfg))
    if section.online_probe.enabled:
        hooks.append(OnlineProbeHook.from_config(cfg))
    if section.wandb.enabled:
        hooks.append(WandbHook.from_config(cfg))
    if section.mlflow.enabled:
        hooks.append(MlflowHook.from_config(cfg))
    hooks.append(CheckpointHook.from_config(cfg))
    for index, extra in enumerate(section.extra):
        try:
            hook_class = HOOKS.get(extra.name)
        except UnknownNameError as exc:
            raise ConfigError(f"hooks.extra[{index}].name: {exc}") from None
        try:
            hooks.append(hook_class(**extra.params))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"hooks.extra[{index}] ({extra.name}): bad params: {exc}") from None
    return hooks


def method_hooks(cfg: Config) -> list[Hook]:
    """The hooks of the SSL method that ``loss.name`` selects.

    ==================  ============================================================
    ``loss.name``       hooks
    ==================  ============================================================
    ``nt_xent``         none (SimCLR is its loss)
    ``moco``            momentum_teacher (key encoder), key_queue
    ``moco_v3``         momentum_teacher (momentum encoder: backbone and projector)
    ``byol``            momentum_teacher (target network)
    ``swav``            prototype_normalization, freeze_prototypes; swav_queue when
                        ``loss.swav.queue_size`` > 0
    ``dino``            momentum_teacher (teacher, on the global views),
                        dino_centering, freeze_prototypes (last layer)
    ``dinov2``          momentum_teacher (teacher, on the whole global views),
                        dino_centering (the teacher temperature; a center only with
                        ``loss.dinov2.centering`` centering), patch_centering (that
                        centering only), freeze_prototypes (last layers)
    ``ibot``            momentum_teacher, dino_centering, patch_centering,
                        freeze_prototypes (the masks come from torch's generator)
    ``barlow_twins``    none
    ``vicreg``          none
    ``simsiam``         none (no momentum encoder)
    ``nnclr``           nnclr_support (the support set of nearest neighbours)
    ``mae``             none (the masks come from torch's generator, checkpointed)
    ==================  ============================================================
    """
    name = cfg.loss.name
    if name == "moco":
        return [MomentumTeacherHook.from_config(cfg), KeyQueueHook.from_config(cfg)]
    if name in ("byol", "moco_v3"):
        return [MomentumTeacherHook.from_config(cfg)]
    if name == "swav":
        hooks: list[Hook] = [
            PrototypeNormalizationHook.from_config(cfg),
            FreezePrototypesHook.from_config(cfg),
        ]
        if cfg.loss.swav.queue_size:
            hooks.append(SwavQueueHook.from_config(cfg))
        return hooks
    if name == "nnclr":
        return [NnclrSupportHook.from_config(cfg)]
    if name == "dino":
        return [
            MomentumTeacherHook.from_config(cfg),
            DinoCenteringHook.from_config(cfg),
            FreezePrototypesHook.from_config(cfg),
        ]
    if name in ("dinov2", "ibot"):
        centered = name == "ibot" or cfg.loss.dinov2.centering == "centering"
        return [
            MomentumTeacherHook.from_config(cfg),
            DinoCenteringHook.from_config(cfg),
            *([PatchCenteringHook.from_config(cfg)] if centered else []),
            FreezePrototypesHook.from_config(cfg),
        ]
    return []

"""The default hook set a config asks for."""

from __future__ import annotations

import importlib
import pkgutil

from hookbus.engine.config import Config
from hookbus.engine.errors import ConfigError
from hookbus.engine.hook import Hook
from hookbus.engine.methods import method_of
from hookbus.engine.registry import UnknownNameError
from hookbus.hooks import methods as method_hook_modules
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.hooks.cuda_cache import CudaCacheHook
from hookbus.hooks.evaluation_report import EvaluationReportHook
from hookbus.hooks.log import LogHook
from hookbus.hooks.meter_sync import MeterSyncHook
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

for _module in pkgutil.iter_modules(method_hook_modules.__path__):
    # The SSL methods' hooks register themselves; the method entries name them.
    importlib.import_module(f"{method_hook_modules.__name__}.{_module.name}")


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
    """The hooks of the SSL method that ``loss.name`` selects, as its entry
    (``hookbus.methods``) declares them: each registered hook built with the parameters the
    entry reads from ``cfg``, when its condition holds. A loss without an entry has none.
    The methods table of docs/methods.md lists them."""
    spec = method_of(cfg.loss.name)
    if spec is None:
        return []
    return [
        HOOKS.get(use.name)(**use.params(cfg))
        for use in spec.hooks
        if use.when is None or use.when(cfg)
    ]

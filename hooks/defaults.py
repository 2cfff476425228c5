"""The default hook set a config asks for."""

from __future__ import annotations

from engine.config import Config
from engine.errors import ConfigError
from engine.hook import Hook
from engine.registry import UnknownNameError
from hooks import HOOKS
from hooks.checkpoint import CheckpointHook
from hooks.cuda_cache import CudaCacheHook
from hooks.evaluation_report import EvaluationReportHook
from hooks.log import LogHook
from hooks.meter_sync import MeterSyncHook
from hooks.metrics_json import MetricsJsonHook
from hooks.nan_check import NanCheckHook
from hooks.progress_bar import ProgressBarHook
from hooks.summary_plot import SummaryPlotHook
from hooks.tensorboard import TensorBoardHook
from hooks.timing import TimingHook


def default_hooks(cfg: Config) -> list[Hook]:
    """The hooks a run of ``cfg`` uses when none are given, in attach order.

    Always: timing, meter sync, checkpoint. Each of log, progress bar, metrics.json,
    TensorBoard, summary plot and NaN check when its ``hooks.<name>.enabled``; CUDA cache clearing
    when ``model.cuda_cache.clear_cuda_cache``; the evaluation report when
    ``hooks.evaluation_report.enabled``; then every ``hooks.extra`` entry, built by name
    with its ``params``.
    """
    section = cfg.hooks
    hooks: list[Hook] = [TimingHook.from_config(cfg), MeterSyncHook()]
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
    hooks.append(CheckpointHook.from_config(cfg))
    for index, extra in enumerate(section.extra):
        try:
            hook_class = HOOKS.get(extra.name)
        except UnknownNameError as exc:
            raise ConfigError(f"hooks.extra[{index}].name: {exc}") from None
        try:
            hooks.append(hook_class(**extra.params))
        except TypeError as exc:
            raise ConfigError(f"hooks.extra[{index}] ({extra.name}): bad params: {exc}") from None
    return hooks

"""The default hook set a config asks for: the standard hooks its ``hooks`` section turns
on, the hooks of its method's entry, and those ``hooks.extra`` names. It imports every
hook module (``hookbus.hooks``), so it stands on the runner's floor, above them."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hookbus.config import Config
from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import HOOKS
from hookbus.engine.errors import ConfigError
from hookbus.engine.methods.entries import config_value, method_of
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
from hookbus.hooks.summary_plot import SummaryPlotHook
from hookbus.hooks.tensorboard import TensorBoardHook
from hookbus.hooks.timing import TimingHook
from hookbus.hooks.unreadable_images import UnreadableImagesHook
from hookbus.hooks.wandb_tracker import WandbHook

for _module in pkgutil.iter_modules(method_hook_modules.__path__):
    # The SSL methods' hooks register themselves; the method entries name them.
    importlib.import_module(f"{method_hook_modules.__name__}.{_module.name}")


@dataclass(frozen=True)
class OptionalHook:
    """A standard hook that a config turns on: ``on`` is the boolean key that turns it
    on; ``build`` makes the hook from the section at the dotted key ``reads`` (its own
    section, for a hook that needs no other), or from the whole config when ``reads`` is
    empty (a hook that reads several sections)."""

    on: str
    build: Callable[[Any], Hook]
    reads: str = ""

    def hook(self, cfg: Config) -> Hook:
        """The hook this row builds for ``cfg``."""
        return self.build(config_value(cfg, self.reads) if self.reads else cfg)


OPTIONAL_HOOKS: tuple[OptionalHook, ...] = (
    OptionalHook("hooks.nan_check.enabled", NanCheckHook.from_config),
    OptionalHook("hooks.log.enabled", LogHook.from_config),
    OptionalHook("hooks.progress_bar.enabled", ProgressBarHook.from_config),
    OptionalHook("hooks.metrics_json.enabled", MetricsJsonHook.from_config),
    OptionalHook("hooks.tensorboard.enabled", TensorBoardHook.from_config),
    OptionalHook("hooks.summary_plot.enabled", SummaryPlotHook.from_config),
    OptionalHook(
        "model.cuda_cache.clear_cuda_cache", CudaCacheHook.from_section, reads="model.cuda_cache"
    ),
    OptionalHook("hooks.evaluation_report.enabled", EvaluationReportHook.from_config),
    OptionalHook(
        "hooks.online_probe.enabled", OnlineProbeHook.from_section, reads="hooks.online_probe"
    ),
    OptionalHook("hooks.wandb.enabled", WandbHook.from_config),
    OptionalHook("hooks.mlflow.enabled", MlflowHook.from_config),
    OptionalHook("data.folder.skip_unreadable", UnreadableImagesHook.from_config),
)
"""The standard hooks a config turns on, in attach order."""


def default_hooks(cfg: Config) -> list[Hook]:
    """The hooks a run of ``cfg`` uses when none are given, in attach order.

    Always: timing, meter sync, checkpoint; the hooks of the method that ``loss.name``
    selects (:func:`method_hooks`). Each of :data:`OPTIONAL_HOOKS` whose key is on: log,
    progress bar, metrics.json, TensorBoard, summary plot and NaN check when their
    ``hooks.<name>.enabled``; CUDA cache clearing when ``model.cuda_cache.clear_cuda_cache``;
    the evaluation report, the online linear probe, the W&B and MLflow trackers when their
    ``hooks.<name>.enabled`` (a ConfigError naming the extra to install when a tracker's
    package is missing); the unreadable-images hook when ``data.folder.skip_unreadable``;
    then every ``hooks.extra`` entry, built by name with its
    ``params``.
    """
    hooks: list[Hook] = [TimingHook.from_config(cfg), MeterSyncHook(), *method_hooks(cfg)]
    hooks += [row.hook(cfg) for row in OPTIONAL_HOOKS if config_value(cfg, row.on) is True]
    hooks.append(CheckpointHook.from_config(cfg))
    hooks += extra_hooks(cfg)
    return hooks


def extra_hooks(cfg: Config) -> list[Hook]:
    """The hooks of ``hooks.extra``, each built by its registered name with its
    ``params``; a ConfigError names the entry whose name or params are wrong."""
    hooks: list[Hook] = []
    for index, extra in enumerate(cfg.hooks.extra):
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


def method_hook(cfg: Config, name: str) -> Hook:
    """The hook registered as ``name`` as the method of ``cfg`` (``loss.name``) builds it,
    from its entry's parameters; a ValueError when that method has no such hook or its
    condition is off for ``cfg``. The one way to build a method's hook by hand from a
    config (``SSLTrainer(cfg, hooks=[method_hook(cfg, "key_queue"), ...])``)."""
    spec = method_of(cfg.loss.name)
    uses = [use for use in spec.hooks if use.name == name] if spec else []
    if not uses:
        raise ValueError(f"loss.name {cfg.loss.name} has no hook {name!r}")
    use = uses[0]
    if use.when is not None and not use.when(cfg):
        raise ValueError(f"loss.name {cfg.loss.name}: hook {name!r} is off for this config")
    return HOOKS.get(name)(**use.params(cfg))

"""Build the meters of a run from its config; meters are chosen by their config section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookbus.engine.config import AccuracyMeterConfig, CollapseMeterConfig, KnnMeterConfig
from hookbus.engine.registry import Registry
from hookbus.parts.config import Config
from hookbus.parts.meters.accuracy import AccuracyMeter
from hookbus.parts.meters.base import Meter
from hookbus.parts.meters.collapse import CollapseMeter
from hookbus.parts.meters.knn import KnnMeter

METERS: Registry[Callable[[Any], Meter]] = Registry("meter")
"""Builders ``(section) -> Meter``, keyed by the name of their section under ``meters``."""


@METERS.register("knn")
def build_knn_meter(cfg: KnnMeterConfig) -> KnnMeter:
    """:class:`KnnMeter` with ``meters.knn.k`` neighbours and its ``vote`` and
    ``temperature``."""
    return KnnMeter(k=cfg.k, vote=cfg.vote, temperature=cfg.temperature)


@METERS.register("accuracy")
def build_accuracy_meter(cfg: AccuracyMeterConfig) -> AccuracyMeter:
    """:class:`AccuracyMeter` at ``meters.accuracy.topk``."""
    return AccuracyMeter(topk=tuple(cfg.topk))


@METERS.register("collapse")
def build_collapse_meter(cfg: CollapseMeterConfig) -> CollapseMeter:
    """:class:`CollapseMeter` (no settings)."""
    return CollapseMeter()


def build_meters(cfg: Config) -> list[Meter]:
    """One meter per enabled section of ``meters``, in the schema's order."""
    meters: list[Meter] = []
    for name in type(cfg.meters).model_fields:
        section = getattr(cfg.meters, name)
        if section.enabled:
            meters.append(METERS.get(name)(section))
    return meters

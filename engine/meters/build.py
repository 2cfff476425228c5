"""Build the meters of a run from its config; meters are chosen by their config section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.config import Config, KnnMeterConfig
from engine.meters.base import Meter
from engine.meters.knn import KnnMeter
from engine.registry import Registry

METERS: Registry[Callable[[Any], Meter]] = Registry("meter")
"""Builders ``(section) -> Meter``, keyed by the name of their section under ``meters``."""


@METERS.register("knn")
def build_knn_meter(cfg: KnnMeterConfig) -> KnnMeter:
    """:class:`KnnMeter` with ``meters.knn.k`` neighbours."""
    return KnnMeter(k=cfg.k)


def build_meters(cfg: Config) -> list[Meter]:
    """One meter per enabled section of ``meters``, in the schema's order."""
    meters: list[Meter] = []
    for name in type(cfg.meters).model_fields:
        section = getattr(cfg.meters, name)
        if section.enabled:
            meters.append(METERS.get(name)(section))
    return meters

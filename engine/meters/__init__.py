"""Meters: metrics accumulated over a phase and summed across ranks."""

from __future__ import annotations

from engine.meters.accuracy import AccuracyMeter
from engine.meters.base import Meter
from engine.meters.build import METERS, build_knn_meter, build_meters
from engine.meters.collapse import CollapseMeter
from engine.meters.knn import KnnMeter, knn_predict

__all__ = [
    "METERS",
    "AccuracyMeter",
    "CollapseMeter",
    "KnnMeter",
    "Meter",
    "build_knn_meter",
    "build_meters",
    "knn_predict",
]

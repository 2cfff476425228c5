"""Meters: metrics accumulated over a phase and summed across ranks."""

from __future__ import annotations

from hookbus.parts.meters.accuracy import AccuracyMeter
from hookbus.parts.meters.base import Meter
from hookbus.parts.meters.build import METERS, build_knn_meter, build_meters
from hookbus.parts.meters.collapse import CollapseMeter
from hookbus.parts.meters.knn import KnnMeter, knn_predict

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

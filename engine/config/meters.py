"""The ``meters`` section: the kNN, accuracy and collapse meters."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hookbus.engine.section import Section


class KnnMeterConfig(Section):
    enabled: bool = Field(True, description="kNN top-1 of backbone features in test phases")
    k: int = Field(20, ge=1, le=100_000, description="neighbours")
    vote: Literal["majority", "weighted"] = Field(
        "majority",
        description="majority: one vote per neighbour; weighted: each neighbour's vote "
        "weighted by exp(cosine similarity / temperature)",
    )
    temperature: float = Field(
        0.07, ge=1e-3, le=100, description="temperature of the weighted vote"
    )


class AccuracyMeterConfig(Section):
    enabled: bool = Field(False, description="top-k accuracy of output logits (linear eval)")
    topk: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default_factory=lambda: [1, 5], min_length=1, description="the k values"
    )


class CollapseMeterConfig(Section):
    enabled: bool = Field(
        False,
        description="collapse diagnostics: feature std, teacher entropy, prototypes in use",
    )


class MetersConfig(Section):
    knn: KnnMeterConfig = Field(default_factory=KnnMeterConfig)
    accuracy: AccuracyMeterConfig = Field(default_factory=AccuracyMeterConfig)
    collapse: CollapseMeterConfig = Field(default_factory=CollapseMeterConfig)

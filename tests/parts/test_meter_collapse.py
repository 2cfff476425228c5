"""CollapseMeter: feature spread, teacher entropy and prototypes in use."""

from __future__ import annotations

import math

import pytest
import torch

from hookbus.parts.meters import CollapseMeter
from hookbus.parts.meters.collapse import feature_std, prototypes_in_use


def test_feature_std_is_zero_at_collapse_and_about_one_when_spread() -> None:
    assert float(feature_std(torch.ones(16, 8))) == pytest.approx(0.0)
    spread = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
    assert float(feature_std(spread)) == pytest.approx(1.0, abs=0.05)


def test_prototypes_in_use_counts_distinct_argmaxes() -> None:
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.8, 0.0, 0.1], [0.0, 0.2, 0.7]])
    assert float(prototypes_in_use(scores)) == 2.0


def test_meter_reports_only_what_the_outputs_allow_averaged_over_steps() -> None:
    meter = CollapseMeter()
    collapsed = {"view_features": [torch.ones(4, 3)], "scores": [torch.eye(4)[:, :3]]}
    meter.update(collapsed, {})
    meter.update({"view_features": [torch.ones(4, 3)], "scores": [torch.ones(4, 3)]}, {})
    assert meter.value() == {"feature_std": 0.0, "prototypes_used": 2.0}


def test_uniform_teacher_targets_have_entropy_log_k() -> None:
    meter = CollapseMeter()
    output = {
        "teacher_scores": [torch.zeros(5, 6)],
        "teacher_center": torch.zeros(6),
        "teacher_temperature": 0.04,
    }
    meter.update(output, {})
    assert meter.value()["teacher_entropy"] == pytest.approx(math.log(6))

"""KnnMemoryHook: the kNN meter's memory bank, recomputed at the start of each test phase."""

from __future__ import annotations

import torch
from ignite.engine import Engine

from engine.evaluation import extract_features
from engine.hook import Hook
from hooks import register_hook


@register_hook("knn_memory")
class KnnMemoryHook(Hook):
    """Fills the memory of meters that need one with features of the memory split.

    ============  ==============================================================
    fires         ``on_phase_start`` of test phases (priority -10)
    reads         ``state.meters``, ``state.base_model`` (its ``encode``), the
                  ``"memory"`` loader in ``state.data_loaders``, ``state.device``
    writes        ``meter.set_memory(features, labels)`` for each meter with
                  ``needs_memory``; the model is left in eval mode
    ============  ==============================================================

    Features come from the frozen backbone in eval mode, under no_grad, on the clean
    (un-augmented) train images.
    """

    priority = -10

    def on_phase_start(self, engine: Engine) -> None:
        state = engine.state
        meters = [m for m in state.meters if getattr(m, "needs_memory", False)]
        if state.train or not meters:
            return
        model = state.base_model
        model.eval()
        with torch.no_grad():
            features, labels = extract_features(
                model.encode, state.data_loaders["memory"], state.device
            )
        for meter in meters:
            meter.set_memory(features, labels)

"""MeterSyncHook: meters summed across ranks at phase end, values published as metrics."""

from __future__ import annotations

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine


@register_hook("meter_sync")
class MeterSyncHook(Hook):
    """Syncs every meter across ranks and writes their values to ``state.metrics``.

    ============  ==============================================================
    fires         ``on_phase_end``, first of its handlers (priority -100), after
                  the trainer's barrier
    reads         ``state.meters``
    writes        each meter's synced state; ``state.metrics`` updated with the
                  meters' ``value()`` dicts (e.g. ``{"knn_top1": 0.97}``); the
                  trainer empties it at each phase start
    ============  ==============================================================

    Every later ``on_phase_end`` handler (logging, TensorBoard, metrics.json,
    checkpoints) sees the same, global values on every rank.
    """

    priority = Priority.FIRST

    def on_phase_end(self, engine: RunEngine) -> None:
        state = engine.state
        metrics: dict[str, float] = {}
        for meter in state.meters:
            meter.sync_state()
            metrics.update(meter.value())
        state.metrics.update(metrics)

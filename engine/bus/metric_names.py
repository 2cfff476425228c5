"""The metric names hookbus records itself, and ignite metrics kept apart from them.

An ignite metric attached to the bus under a name that hookbus's phase record sets
itself (``loss``, ``iteration``, a meter's value, a hook's metric) would replace that
value in ``state.metrics``, ``metrics.json`` and ``state.history``;
:class:`hookbus.engine.bus.bus_engine.BusEngine` gives it the ``ignite/`` prefix instead, and says
so in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ignite.metrics import Metric

RECORD_KEYS = ("phase_idx", "phase", "train", "train_phase_idx", "iteration", "loss")
"""The keys hookbus's phase record sets itself (``metrics.json``, ``state.history``:
:meth:`hookbus.engine.bus.state.RunState.phase_record`), beside the metrics."""

IGNITE_METRIC_PREFIX = "ignite/"
"""What an ignite metric named like a key hookbus records (:func:`taken_metric_names`)
is recorded under."""

_METRIC_LOG = logging.getLogger("hookbus")


def taken_metric_names(state: Any) -> frozenset[str]:
    """The names hookbus records itself in a phase's record: :data:`RECORD_KEYS`, the
    values of the run's meters (``Meter.value_names``) and the metrics its hooks write
    (``Hook.metric_names``)."""
    meters = getattr(state, "meters", None) or ()
    hooks = getattr(state, "hooks", None) or ()
    return frozenset(
        (
            *RECORD_KEYS,
            *(name for meter in meters for name in getattr(meter, "value_names", ())),
            *(name for hook in hooks for name in getattr(hook, "metric_names", ())),
        )
    )


def metric_kept_apart(
    handler: Callable, args: tuple[Any, ...], taken: frozenset[str]
) -> tuple[Any, ...]:
    """``args`` of ignite's ``Metric.completed`` (the metric's name first) with a name
    from ``taken`` given the :data:`IGNITE_METRIC_PREFIX`; others unchanged."""
    owner = getattr(handler, "__self__", None)
    if not isinstance(owner, Metric) or getattr(handler, "__name__", "") != "completed":
        return args
    if not args or args[0] not in taken:
        return args
    name = f"{IGNITE_METRIC_PREFIX}{args[0]}"
    _METRIC_LOG.warning(
        "ignite metric %s is named %r, a key hookbus records itself (the phase's %s): it "
        "is recorded as %r in engine.state.metrics, metrics.json and state.history; name "
        "it otherwise to keep your name",
        type(owner).__name__,
        args[0],
        "mean loss" if args[0] == "loss" else f"{args[0]} value",
        name,
    )
    return (name, *args[1:])

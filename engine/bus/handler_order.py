"""Handler order: every handler of an event runs in ``(priority, registration order)``.

ignite keeps each event's handlers in a list and runs them in the order they were
added. This module keeps, per engine, the priority and sequence number of every handler
in those lists, and sorts a list again whenever a handler joins it, so that lower
priorities run first and equal priorities keep their registration order. The order is
resolved once, when a handler is added; firing an event costs nothing more.

Handlers added with ignite's own ``add_event_handler`` (what ignite's handlers, metrics
and loggers do in their ``attach``) are ordered too: on
:class:`hookbus.engine.bus.bus_engine.BusEngine` at the priority of the enclosing
``engine.at_priority(...)`` block, else at ``Priority.NORMAL``; on any other engine at
``Priority.NORMAL``, in the order they came.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ignite.engine import Engine

from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.priorities import Priority

_PLAN_ATTR = "_hookbus_plan"


@dataclass(order=True)
class Registration:
    """One handler in an event's list: where it runs, and the name the plan shows."""

    priority: int
    sequence: float
    """Registration order (a fraction for a handler put between two others directly)."""
    name: str = field(compare=False)
    handler: Callable[..., Any] = field(compare=False)
    """The callable as it was given (a filtered handler's wrapper unwrapped)."""


class _Plan:
    """The registrations of one engine, keyed by the id of the callable ignite stores."""

    def __init__(self) -> None:
        self.entries: dict[int, Registration] = {}
        self.sequence = itertools.count()
        self.newest: Registration | None = None


def _plan(engine: Engine) -> _Plan:
    plan = getattr(engine, _PLAN_ATTR, None)
    if plan is None:
        plan = _Plan()
        setattr(engine, _PLAN_ATTR, plan)
    return plan


def _given(stored: Callable[..., Any]) -> Callable[..., Any]:
    """The handler as given to ignite: a filtered handler is stored as a wrapper."""
    parent = getattr(stored, "_parent", None)
    return parent() if parent is not None else stored


def place_newest(
    engine: Engine, event: Any, priority: int = Priority.NORMAL, name: str | None = None
) -> Registration:
    """Give the handler ignite appended last to ``event``'s list its place.

    Handlers added to the list behind the plan's back are adopted first: those of
    ignite's own ``add_event_handler`` on an engine that is not a ``BusEngine`` at
    ``Priority.NORMAL`` in the order they came; those put straight into the list
    between handlers the plan knows (``BasicTimeProfiler`` inserts its timers first
    and last) keep the place they were given.
    """
    plan = _plan(engine)
    handlers = engine._event_handlers[event]
    _adopt_unknown(plan, [stored for stored, _, _ in handlers[:-1]])
    newest = handlers[-1][0]
    plan.entries.pop(id(newest), None)
    registration = _adopt(plan, newest, priority, name)
    handlers.sort(key=lambda entry: plan.entries[id(entry[0])])
    plan.newest = registration
    return registration


def _known(plan: _Plan, stored: Callable[..., Any]) -> Registration | None:
    known = plan.entries.get(id(stored))
    return known if known is not None and known.handler is _given(stored) else None


def _adopt(
    plan: _Plan,
    stored: Callable[..., Any],
    priority: int,
    name: str | None,
    sequence: float | None = None,
) -> Registration:
    known = _known(plan, stored)
    if known is not None:
        return known
    given = _given(stored)
    order = next(plan.sequence) if sequence is None else sequence
    registration = Registration(int(priority), order, name or _name(given), given)
    plan.entries[id(stored)] = registration
    return registration


def _adopt_unknown(plan: _Plan, stored: list[Callable[..., Any]]) -> None:
    """Adopt the handlers of one event's list that the plan does not know, each run of
    them between its known neighbours (at the left one's priority, ordered between
    them), or at ``Priority.NORMAL`` in list order when the list holds no known one."""
    known = [_known(plan, handler) for handler in stored]
    if not any(known):
        for handler in stored:
            _adopt(plan, handler, Priority.NORMAL, None)
        return
    index = 0
    while index < len(stored):
        if known[index] is not None:
            index += 1
            continue
        end = index
        while end < len(stored) and known[end] is None:
            end += 1
        left = known[index - 1] if index > 0 else None
        right = known[end] if end < len(stored) else None
        count = end - index
        for offset, handler in enumerate(stored[index:end], start=1):
            priority, sequence = _between(left, right, offset / (count + 1))
            _adopt(plan, handler, priority, None, sequence)
        index = end


def _between(
    left: Registration | None, right: Registration | None, fraction: float
) -> tuple[int, float]:
    """A (priority, sequence) that sorts after ``left`` and before ``right``."""
    if left is None:
        assert right is not None
        return right.priority, right.sequence - 1 + fraction
    if right is None or right.priority != left.priority:
        return left.priority, left.sequence + fraction
    return left.priority, left.sequence + (right.sequence - left.sequence) * fraction


def forget_removed(engine: Engine) -> None:
    """Drop the plan's entries of handlers no longer in any event's list."""
    plan = _plan(engine)
    present = {
        id(stored) for handlers in engine._event_handlers.values() for stored, _, _ in handlers
    }
    for key in [key for key in plan.entries if key not in present]:
        del plan.entries[key]


def add_handler(
    engine: Engine,
    event: Any,
    handler: Callable[[Engine], Any],
    *,
    priority: int = Priority.NORMAL,
    name: str | None = None,
) -> Registration:
    """Register ``handler`` for ``event`` (on any ignite engine) so that it runs in
    priority order; returns the registration, which :func:`remove_handler` takes back."""
    at_priority = getattr(engine, "at_priority", None)
    if at_priority is None:
        engine.add_event_handler(event, handler)
        return place_newest(engine, event, priority, name)
    with at_priority(priority, name=name):
        engine.add_event_handler(event, handler)
    registration = _plan(engine).newest
    assert registration is not None and registration.handler is handler
    return registration


def remove_handler(engine: Engine, event: Any, registration: Registration) -> None:
    """Remove a handler that :func:`add_handler` registered."""
    engine.remove_event_handler(registration.handler, event)
    forget_removed(engine)


def priority_of(engine: Engine, stored: Callable[..., Any]) -> tuple[str, int]:
    """The plan's name and priority of a stored handler (NORMAL when it was never seen)."""
    registration = _plan(engine).entries.get(id(stored))
    if registration is None:
        return _name(_given(stored)), int(Priority.NORMAL)
    return registration.name, registration.priority


def handler_priorities(engine: Engine, events: Any = SSLEvents) -> dict[str, list[tuple[str, int]]]:
    """For each event, its handlers' names and priorities in the order they run."""
    return {
        getattr(event, "value", str(event)): [
            priority_of(engine, stored) for stored, _, _ in engine._event_handlers.get(event, [])
        ]
        for event in events
    }


def hook_plan(engine: Engine, events: Any = SSLEvents) -> dict[str, list[str]]:
    """For each SSL event (or each of ``events``), the names of its handlers in the order
    they run; handlers added with ignite's ``add_event_handler`` are listed by their
    qualified name."""
    return {
        event: [name for name, _ in handlers]
        for event, handlers in handler_priorities(engine, events).items()
    }


def _name(handler: Callable[..., Any]) -> str:
    """A handler's name in the plan: a function's or method's qualified name, a callable
    object's class name."""
    owner = getattr(handler, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return f"{type(owner).__qualname__}.{handler.__name__}"
    return getattr(handler, "__qualname__", None) or type(handler).__qualname__

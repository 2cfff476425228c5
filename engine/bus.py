"""Priority-ordered handler registration on an ignite engine.

ignite runs the handlers of an event in registration order. The bus keeps, per engine,
a sorted plan of ``(priority, sequence)`` for the handlers it added and re-registers the
ones that must run after a newcomer, so that lower priorities run first and ties keep
their registration order. It is resolved once, at attach time: firing an event costs
exactly what ignite's own dispatch costs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ignite.engine import Engine

from engine.events import SSLEvents

_PLAN_ATTR = "_hookbus_plan"


@dataclass(order=True)
class Registration:
    """One handler registered through the bus."""

    priority: int
    sequence: int
    name: str = field(compare=False)
    handler: Callable[[Engine], Any] = field(compare=False)


def _plan(engine: Engine) -> dict[Any, list[Registration]]:
    plan = getattr(engine, _PLAN_ATTR, None)
    if plan is None:
        plan = {}
        setattr(engine, _PLAN_ATTR, plan)
    return plan


def add_handler(
    engine: Engine,
    event: SSLEvents,
    handler: Callable[[Engine], Any],
    *,
    priority: int = 0,
    name: str | None = None,
) -> Registration:
    """Register ``handler`` for ``event`` so that it runs in priority order.

    Lower priorities run first; equal priorities run in the order they were added.
    Returns the registration, which :func:`remove_handler` takes back.
    """
    entries = _plan(engine).setdefault(event, [])
    sequence = 1 + max(
        (e.sequence for entries_ in _plan(engine).values() for e in entries_), default=-1
    )
    entry = Registration(priority, sequence, name or _handler_name(handler), handler)
    position = bisect.bisect_right(entries, entry)
    later = entries[position:]
    for moved in later:
        engine.remove_event_handler(moved.handler, event)
    engine.add_event_handler(event, handler)
    for moved in later:
        engine.add_event_handler(event, moved.handler)
    entries.insert(position, entry)
    return entry


def remove_handler(engine: Engine, event: SSLEvents, registration: Registration) -> None:
    """Remove a handler that :func:`add_handler` registered."""
    entries = _plan(engine).get(event, [])
    entries.remove(registration)
    engine.remove_event_handler(registration.handler, event)


def hook_plan(engine: Engine) -> dict[str, list[str]]:
    """For each SSL event, the names of its handlers in the order they run.

    Handlers added with ignite's own ``add_event_handler`` are listed too, by their
    qualified name, at the place ignite will run them.
    """
    names: dict[int, str] = {}
    for entries in _plan(engine).values():
        for entry in entries:
            names[id(entry.handler)] = entry.name
    plan: dict[str, list[str]] = {}
    for event in SSLEvents:
        handlers = engine._event_handlers.get(event, [])
        plan[event.value] = [names.get(id(h), _handler_name(h)) for h, _, _ in handlers]
    return plan


def handler_priorities(engine: Engine) -> dict[str, list[tuple[str, int]]]:
    """Like :func:`hook_plan`, with each bus handler's priority (ignite-native ones: 0)."""
    priorities: dict[int, int] = {}
    for entries in _plan(engine).values():
        for entry in entries:
            priorities[id(entry.handler)] = entry.priority
    plan = hook_plan(engine)
    result: dict[str, list[tuple[str, int]]] = {}
    for event in SSLEvents:
        handlers = engine._event_handlers.get(event, [])
        result[event.value] = [
            (name, priorities.get(id(h), 0))
            for name, (h, _, _) in zip(plan[event.value], handlers, strict=True)
        ]
    return result


def _handler_name(handler: Callable[..., Any]) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)

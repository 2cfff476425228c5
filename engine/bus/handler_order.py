"""Handler order: every handler of an event runs in ``(priority, registration order)``.

ignite keeps each event's handlers in a list and runs them in order. A handler placed
here is moved, once, to its place in that list: after every handler of its priority or
a lower one, before the first of a higher one. Firing is ignite's own: the list is the
order. Each engine keeps the priority and plan name of the handlers it placed (for the
hook plan); a handler put into the list by other means (ignite's ``add_event_handler``
on a plain engine, ignite's profilers inserting their timers) keeps the place it was
given and stands at the priority of the placed handler before it (of the one after it
at the front; ``Priority.NORMAL`` in a list with none placed).

Handlers added with ignite's own ``add_event_handler`` (what ignite's handlers, metrics
and loggers do in their ``attach``) are placed too on
:class:`hookbus.engine.bus.bus_engine.BusEngine`: at the priority of the enclosing
``engine.at_priority(...)`` block, else at ``Priority.NORMAL``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ignite.engine import Engine

from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.priorities import Priority

_PLACES_ATTR = "_hookbus_places"


@dataclass(frozen=True)
class Registration:
    """One placed handler: where it runs, and the name the plan shows."""

    priority: int
    name: str
    handler: Callable[..., Any]
    """The callable as it was given (a filtered handler's wrapper unwrapped)."""
    stored: Callable[..., Any]
    """The callable ignite keeps in the event's list (the wrapper of a filtered one)."""


def _places(engine: Engine) -> dict[int, Registration]:
    """The engine's placed handlers, by the id of the callable ignite stores."""
    places = getattr(engine, _PLACES_ATTR, None)
    if places is None:
        places = {}
        setattr(engine, _PLACES_ATTR, places)
    return places


def _given(stored: Callable[..., Any]) -> Callable[..., Any]:
    """The handler as given to ignite: a filtered handler is stored as a wrapper."""
    parent = getattr(stored, "_parent", None)
    return parent() if parent is not None else stored


def _placed(engine: Engine, stored: Callable[..., Any]) -> Registration | None:
    found = _places(engine).get(id(stored))
    return found if found is not None and found.stored is stored else None


def _priorities(engine: Engine, entries: list[Any]) -> list[int]:
    """The priority each entry of an event's list stands at (see the module's text)."""
    known = [_placed(engine, stored) for stored, _, _ in entries]
    first = next((entry.priority for entry in known if entry is not None), Priority.NORMAL)
    levels, level = [], first
    for entry in known:
        level = entry.priority if entry is not None else level
        levels.append(level)
    return levels


def place_newest(
    engine: Engine, event: Any, priority: int = Priority.NORMAL, name: str | None = None
) -> Registration:
    """Move the handler ignite appended last to ``event``'s list to its place: after
    every handler standing at ``priority`` or lower, before the first higher one."""
    entries = engine._event_handlers[event]
    newest = entries.pop()
    levels = _priorities(engine, entries)
    index = next((i for i, level in enumerate(levels) if level > priority), len(entries))
    entries.insert(index, newest)
    stored = newest[0]
    given = _given(stored)
    registration = Registration(int(priority), name or _name(given), given, stored)
    _places(engine)[id(stored)] = registration
    return registration


def forget_removed(engine: Engine) -> None:
    """Drop the places of handlers no longer in any event's list."""
    places = _places(engine)
    present = {
        id(stored) for handlers in engine._event_handlers.values() for stored, _, _ in handlers
    }
    for key in [key for key in places if key not in present]:
        del places[key]


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
    stored = engine._event_handlers[event]
    registration = next(
        found
        for entry in stored
        if (found := _placed(engine, entry[0])) is not None and found.handler is handler
    )
    return registration


def remove_handler(engine: Engine, event: Any, registration: Registration) -> None:
    """Remove a handler that :func:`add_handler` registered."""
    engine.remove_event_handler(registration.handler, event)
    forget_removed(engine)


def handler_priorities(engine: Engine, events: Any = SSLEvents) -> dict[str, list[tuple[str, int]]]:
    """For each event, its handlers' names and priorities in the order they run."""
    plan = {}
    for event in events:
        entries = engine._event_handlers.get(event, [])
        names = [
            found.name if (found := _placed(engine, stored)) else _name(_given(stored))
            for stored, _, _ in entries
        ]
        levels = _priorities(engine, entries)
        plan[getattr(event, "value", str(event))] = list(zip(names, levels, strict=True))
    return plan


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

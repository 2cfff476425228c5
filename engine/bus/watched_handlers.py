"""The handler lists of a :class:`~hookbus.engine.bus.bus_engine.BusEngine` that say
when they change.

The bus fires its fast-path events from tuples of ready handlers, resolved from ignite's
``engine._event_handlers``. ignite's own tools (``BasicTimeProfiler``,
``HandlersTimeProfiler``) insert, append and replace entries in those lists directly;
:class:`WatchedHandlers` holds every list as a :class:`_WatchedList`, and any change to
the mapping or to a list calls the engine's ``invalidate_dispatch()``, so the next
firing rebuilds the tuples.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookbus.engine.bus.bus_engine import BusEngine


class _WatchedList(list):
    """An event's handler list that tells its engine when it changes."""

    def __init__(self, engine: BusEngine, entries: Iterable[Any] = ()) -> None:
        super().__init__(entries)
        self._engine = weakref.ref(engine)

    def _changed(self) -> None:
        engine = self._engine()
        if engine is not None:
            engine.invalidate_dispatch()


def _watching(name: str, kind: type = list) -> Callable[..., Any]:
    """``kind``'s method ``name``, telling the engine of the change after it."""
    method = getattr(kind, name)

    def changed(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        self._changed()
        return result

    changed.__name__ = name
    return changed


for _name in (
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__", "__imul__",
):  # fmt: skip
    setattr(_WatchedList, _name, _watching(_name))


class WatchedHandlers(dict):
    """``engine._event_handlers``: every list it holds is a :class:`_WatchedList` (a
    missing event gets an empty one, as ignite's ``defaultdict(list)`` does), and
    putting or dropping a list marks the engine's dispatch stale."""

    def __init__(self, engine: BusEngine, handlers: dict[Any, list]) -> None:
        super().__init__()
        self._engine = weakref.ref(engine)
        for event, entries in handlers.items():
            self[event] = entries

    def __missing__(self, event: Any) -> list:
        self[event] = []
        return dict.__getitem__(self, event)

    def __setitem__(self, event: Any, entries: list) -> None:
        engine = self._engine()
        if engine is not None and not isinstance(entries, _WatchedList):
            entries = _WatchedList(engine, entries)
        super().__setitem__(event, entries)
        self._changed()

    def _changed(self) -> None:
        engine = self._engine()
        if engine is not None:
            engine.invalidate_dispatch()

    def setdefault(self, event: Any, entries: list | None = None) -> list:
        if event not in self:
            self[event] = [] if entries is None else entries
        return dict.__getitem__(self, event)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for event, entries in dict(*args, **kwargs).items():
            self[event] = entries


for _name in ("__delitem__", "pop", "popitem", "clear"):
    setattr(WatchedHandlers, _name, _watching(_name, dict))

"""Name-to-object registries, so that recipes choose steps, hooks and parts by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that no registry entry has; the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection of builders, e.g. the train steps or the data sets.

    Example::

        LOSSES = Registry("loss")

        @LOSSES.register("nt_xent")
        def build_nt_xent(cfg): ...

        LOSSES.get("nt_xent")
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that registers its target under ``name``."""

        def decorator(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        """The entry registered as ``name``; raises :class:`UnknownNameError` otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

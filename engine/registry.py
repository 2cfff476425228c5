"""Name-to-object registries, so that recipes choose steps, hooks and parts by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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

        @LOSSES.register("cross_entropy")
        def build_cross_entropy(cfg): ...

        LOSSES.get("cross_entropy")

    A registry made with ``readable`` keys (config keys that only some entries read)
    lets an entry declare the ones it reads, ``register(name, reads=...)``, so that a
    config setting another one can be refused naming the entries that do read it.
    """

    def __init__(self, kind: str, readable: Sequence[str] = ()) -> None:
        self.kind = kind
        self.readable = tuple(readable)
        self._entries: dict[str, T] = {}
        self._reads: dict[str, tuple[str, ...]] = {}

    def register(self, name: str, reads: Sequence[str] | None = None) -> Callable[[T], T]:
        """Decorator that registers its target under ``name``, which reads the keys
        ``reads`` of :attr:`readable` (None: it may read any, nothing is refused)."""
        unknown = sorted(set(reads or ()) - set(self.readable))
        if unknown:
            raise ValueError(
                f"{self.kind} {name!r}: {', '.join(unknown)} not among the keys a "
                f"{self.kind} may declare ({', '.join(self.readable) or 'none'})"
            )

        def decorator(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            if reads is not None:
                self._reads[name] = tuple(reads)
            return obj

        return decorator

    def reads(self, name: str) -> tuple[str, ...] | None:
        """The keys the entry ``name`` reads, or None when it did not declare them."""
        return self._reads.get(name)

    def readers(self, key: str) -> list[str]:
        """The entries that read ``key`` (or may: those that declared nothing)."""
        return [name for name in self.names() if key in self._reads.get(name, (key,))]

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

"""The hook registry: recipes add hooks by name under ``hooks.extra``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hookbus.engine.hook import Hook
from hookbus.engine.registry import Registry

H = TypeVar("H", bound=type[Hook])

HOOKS: Registry[type[Hook]] = Registry("hook")
"""Hooks a recipe can add by name under ``hooks.extra``."""


def register_hook(name: str) -> Callable[[H], H]:
    """Decorator registering a :class:`hookbus.Hook` subclass under ``name``.

    Example::

        @register_hook("print_loss")
        class PrintLoss(Hook): ...
    """
    return HOOKS.register(name)  # type: ignore[return-value]

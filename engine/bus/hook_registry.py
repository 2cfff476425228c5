"""The hook registry: recipes add hooks by name under ``hooks.extra``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hookbus.engine.bus.hook import REGISTERED_NAME, Hook
from hookbus.engine.registry import Registry

H = TypeVar("H", bound=type[Hook])

HOOKS: Registry[type[Hook]] = Registry("hook")
"""Hooks a recipe can add by name under ``hooks.extra``."""


def register_hook(name: str) -> Callable[[H], H]:
    """Decorator registering a :class:`hookbus.Hook` subclass under ``name``, which
    becomes the name of its hooks (:attr:`Hook.name`): the hook plan shows it, and
    checkpoints carry the hook's state under it. A class has one name: registering it
    under a second one is refused.

    Example::

        @register_hook("print_loss")
        class PrintLoss(Hook): ...

        PrintLoss().name  # 'print_loss'
    """
    register = HOOKS.register(name)

    def decorator(cls: H) -> H:
        known = cls.__dict__.get(REGISTERED_NAME)
        if known is not None and known != name:
            raise ValueError(
                f"hook class {cls.__name__} is already registered as {known!r}; a hook class "
                f"has one name, so it cannot be registered as {name!r} too (register a "
                "subclass under the second name)"
            )
        register(cls)
        setattr(cls, REGISTERED_NAME, name)
        return cls

    return decorator

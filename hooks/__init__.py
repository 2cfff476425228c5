"""hookbus's standard handlers, one module per concern."""

from __future__ import annotations

from engine.registry import Registry

HOOKS: Registry = Registry("hook")
"""Hooks a recipe can add by name under ``hooks.extra``."""


def register_hook(name: str):
    """Decorator registering a :class:`engine.Hook` subclass under ``name``."""
    return HOOKS.register(name)


from hooks.defaults import default_hooks  # noqa: E402  (the hook modules need register_hook)

__all__ = ["HOOKS", "default_hooks", "register_hook"]

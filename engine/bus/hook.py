"""The Hook base class: a handler object whose ``on_*`` methods subscribe to SSL events."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ignite.engine import Engine

from hookbus.engine.bus.events import SSLEvents
from hookbus.engine.bus.handler_order import Registration, add_handler, remove_handler
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState

H = TypeVar("H", bound="Hook")

REGISTERED_NAME = "_registered_name"
"""The class attribute ``register_hook(name)`` sets to ``name`` on the class it registers."""


class Hook:
    """Base class of every hookbus handler.

    A subclass defines any of the methods named after :class:`hookbus.SSLEvents`
    (``on_start``, ``on_phase_start``, ``on_forward``, ``on_loss_and_meter``,
    ``on_backward``, ``on_update``, ``on_step``, ``on_phase_end``, ``on_end``,
    ``on_exception``), each taking the engine, typed :class:`hookbus.RunEngine`: its
    ``state`` is a :class:`hookbus.RunState` (an override that leaves ``engine``
    unannotated gets that type from here in pyright; mypy needs ``engine: RunEngine``).
    :meth:`attach` registers one handler per method it defines, in ``priority`` order
    (lower runs first, ties in attach order).

    Hooks read and write the run state (``engine.state``), never each other. A hook that
    keeps state across steps (a queue, a teacher, a timer) overrides :meth:`state_dict`
    and :meth:`load_state_dict`; checkpoints carry that state under the hook's ``name``
    (see :func:`default_name`; ``name=`` sets another, for a second hook of one class).

    Example::

        class PrintLoss(Hook):
            priority = Priority.REPORT

            @rank_zero_only
            def on_step(self, engine):
                loss = engine.state.loss  # torch.Tensor | None: None before a step
                if loss is not None and self.every_n_train_iterations(engine, 10):
                    print(float(loss))

        PrintLoss().attach(trainer.engine)
    """

    priority: ClassVar[int] = Priority.NORMAL
    """Order among the handlers of one event: lower runs first (see :class:`Priority`)."""

    run_fields: ClassVar[tuple[str, ...]] = ()
    """Run-state fields that the trainer sets and this hook needs: on an engine that is
    not the trainer's (:func:`hookbus.prepare_engine`), :meth:`attach` refuses while one
    of them is still empty, naming them."""

    metric_names: ClassVar[tuple[str, ...]] = ()
    """Keys this hook writes into ``state.metrics``: an ignite metric attached under one
    of them is recorded as ``ignite/<name>`` instead of replacing the hook's value."""

    def __init__(self, *, name: str | None = None, priority: int | None = None) -> None:
        self.name: str = name or default_name(type(self))
        if priority is not None:
            self.priority = priority  # type: ignore[misc]
        self._registrations: list[tuple[SSLEvents, Registration]] = []

    def subscribed_events(self) -> list[SSLEvents]:
        """The events this hook subscribes to: those whose method it overrides."""
        return [
            event
            for event in SSLEvents
            if getattr(type(self), event.value, None) is not getattr(Hook, event.value, None)
        ]

    def attach(self: H, engine: Engine) -> H:
        """Register this hook's methods on ``engine``; returns the hook.

        ``engine`` is the trainer's (``trainer.engine``), a :class:`hookbus.FakeEngine`,
        or any ignite engine made ready with :func:`hookbus.prepare_engine`.
        """
        if self._registrations:
            raise RuntimeError(f"hook {self.name!r} is already attached to an engine")
        if not all(engine.has_registered_events(event) for event in SSLEvents) or not isinstance(
            engine.state, RunState
        ):
            raise ValueError(
                f"hook {self.name!r} cannot attach to this {type(engine).__name__}: it has no "
                "SSL events or no hookbus run state; call hookbus.prepare_engine(engine) "
                "first (or use trainer.engine / hookbus.FakeEngine)"
            )
        _check_run_fields(self, engine)
        for event in self.subscribed_events():
            handler = getattr(self, event.value)
            registration = add_handler(
                engine, event, handler, priority=self.priority, name=self.name
            )
            self._registrations.append((event, registration))
        return self

    def detach(self, engine: Engine) -> None:
        """Remove this hook's handlers from ``engine``."""
        for event, registration in self._registrations:
            remove_handler(engine, event, registration)
        self._registrations = []

    @staticmethod
    def every_n_train_iterations(engine: RunEngine, n: int) -> bool:
        """True after a train step that brings ``state.iteration`` (train steps done in
        the run) to a multiple of ``n``; False in test phases, and always when ``n`` < 1
        (a frequency of 0 means never). For ``on_step`` and ``on_update`` handlers."""
        state = engine.state
        return n > 0 and state.train and state.iteration % n == 0

    @staticmethod
    def is_rank_zero(engine: RunEngine) -> bool:
        """True in the process of rank 0 (the only one in a run of one process)."""
        return engine.state.rank == 0

    def has_state(self) -> bool:
        """True when the hook overrides :meth:`state_dict` (it is then checkpointed)."""
        return type(self).state_dict is not Hook.state_dict

    def state_dict(self) -> dict[str, Any]:
        """State to carry in checkpoints; hooks without state return an empty dict."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, priority={self.priority})"

    # The event methods. Subclasses define the ones they need; the base versions are
    # never registered.
    def on_start(self, engine: RunEngine) -> None: ...
    def on_phase_start(self, engine: RunEngine) -> None: ...
    def on_forward(self, engine: RunEngine) -> None: ...
    def on_loss_and_meter(self, engine: RunEngine) -> None: ...
    def on_backward(self, engine: RunEngine) -> None: ...
    def on_update(self, engine: RunEngine) -> None: ...
    def on_step(self, engine: RunEngine) -> None: ...
    def on_phase_end(self, engine: RunEngine) -> None: ...
    def on_end(self, engine: RunEngine) -> None: ...
    def on_exception(self, engine: RunEngine) -> None: ...


def _check_run_fields(hook: Hook, engine: Engine) -> None:
    """Refuse ``hook`` on a prepared plain engine whose run state lacks its fields."""
    if getattr(engine, "runs_phases", False):
        return
    missing = [name for name in hook.run_fields if not getattr(engine.state, name, None)]
    if missing:
        raise ValueError(
            f"hook {hook.name!r} needs the run-state field(s) {', '.join(missing)}, which "
            "hookbus's trainer sets and this engine's state lacks: set them on "
            "engine.state before attaching (see docs/reference/run-state.md), or attach "
            "the hook to trainer.engine"
        )


def rank_zero_only(
    method: Callable[[H, RunEngine], None],
) -> Callable[[H, RunEngine], None]:
    """Decorator for a hook's event method: it runs in the process of rank 0 only.

    For handlers that write files or print; other ranks return at once. A method that
    must also run elsewhere (closing what every rank opened) checks
    :meth:`Hook.is_rank_zero` inside instead.
    """

    @functools.wraps(method)
    def on_rank_zero(self: H, engine: RunEngine) -> None:
        if engine.state.rank == 0:
            method(self, engine)

    return on_rank_zero


def default_name(cls: type[Hook]) -> str:
    """The name of a hook of class ``cls`` made without ``name=``: the name the class is
    registered under (``@register_hook("loss_ema") class LossEMAHook`` gives
    ``loss_ema``), else the class name in snake case without a ``Hook`` ending
    (``PrintLoss`` gives ``print_loss``). A subclass has its own: it does not inherit
    its parent's registered name."""
    registered = cls.__dict__.get(REGISTERED_NAME)
    return registered if registered is not None else _snake_case(cls.__name__)


def _snake_case(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    text = "".join(out)
    return text[: -len("_hook")] if text.endswith("_hook") else text

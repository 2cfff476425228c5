"""The engine as hooks and train steps see it: :class:`RunEngine`, a typing protocol.

Every ``on_*`` method of a :class:`hookbus.Hook` and every train step takes the engine,
typed :class:`RunEngine`, so that ``engine.state`` is a :class:`hookbus.RunState` (with
its fields and their types: ``engine.state.loss`` is ``torch.Tensor | None``) for the
type checker and the editor. ``trainer.engine`` and :class:`hookbus.FakeEngine` (both a
:class:`hookbus.engine.bus.bus_engine.BusEngine`) are ``RunEngine``; so is any ignite engine after
:func:`hookbus.prepare_engine`, which lays a ``RunState`` on it at run time.

A hook subclass whose ``def on_step(self, engine)`` leaves ``engine`` unannotated gets
this type from :class:`hookbus.Hook` in pyright and the editors built on it; mypy types
an unannotated parameter ``Any`` and skips the method's body unless it is annotated
(``engine: RunEngine``) or ``check_untyped_defs`` is on (docs/guides/editor-support.md).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from hookbus.engine.bus.state import RunState


class RunEngine(Protocol):
    """What a hook's or a train step's engine offers: the run state, the bus, and stops.

    Example::

        class LossPrinter(Hook):
            def on_step(self, engine: RunEngine) -> None:
                loss = engine.state.loss  # torch.Tensor | None
                if loss is not None and engine.state.iteration % 10 == 0:
                    print(float(loss))
    """

    @property
    def state(self) -> RunState:
        """The run state the hooks and the step read and write."""
        ...

    @property
    def logger(self) -> logging.Logger:
        """The engine's logger (``hookbus.ignite`` on the trainer's engine)."""
        ...

    def fire_event(self, event_name: Any) -> None:
        """Run the handlers of ``event_name`` (an :class:`hookbus.SSLEvents` member or one
        of ignite's ``Events``) in priority order."""
        ...

    def terminate(self) -> None:
        """Ask the run to stop at the next step or phase boundary."""
        ...

    def terminate_epoch(self) -> None:
        """Ask the current phase to end at the next step boundary."""
        ...

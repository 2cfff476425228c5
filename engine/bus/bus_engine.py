"""The bus: an ignite engine with the SSL events and handlers ordered by priority.

:class:`BusEngine` is the engine of :class:`hookbus.SSLTrainer` and of
:class:`hookbus.FakeEngine`. Everything ignite offers on an engine works on it
(``add_event_handler`` with extra arguments and event filters, removable handles,
``has_event_handler``, ``state_dict``, ``terminate``), with these differences:

- handlers run in ``(priority, registration order)`` on every event: each is inserted at
  its place in ignite's own handler list when it is added
  (:mod:`hookbus.engine.bus.handler_order`), and ignite's ``fire_event`` runs the list;
  ignite's own handlers get ``Priority.NORMAL``, or the priority of an enclosing
  ``with engine.at_priority(level):`` block;
- a filter on an event that has no counter (``on_start(every=2)``, say) is refused when
  the handler is attached, not when the event fires;
- ``run()``, ``interrupt()`` and ``set_data()`` are refused: the trainer runs the
  phases (``trainer.train()``) on the data it built, and ``terminate()`` ends them;
- ``state.get_event_attrib_value`` of ``on_phase_start`` and ``on_phase_end`` is the
  epoch (train phases begun), the global step that ignite's ``global_step_from_engine``
  and loggers name a phase by, test phases included; their filters count phases;
- an ignite metric attached under a name that hookbus's phase record sets itself
  (``loss``, ``iteration``...; a meter's value such as ``knn_top1``; a hook's metric
  such as ``probe_top1``: :mod:`hookbus.engine.bus.metric_names`) is kept apart as
  ``ignite/<name>`` (said in the log), so it never replaces the phase's mean loss,
  counters or meter values in ``metrics.json`` and ``state.history``;
- ``terminate()`` also records who asked, in ``state.stopped_by``;
- ``engine.logger`` is the ``hookbus.ignite`` logger, so what handlers log through it
  reaches the run's ``log.txt`` and the console with hookbus's own lines.

Handlers that ignite's tools put into ``engine._event_handlers`` directly
(``BasicTimeProfiler``, ``HandlersTimeProfiler`` insert, append and replace entries
themselves) run where they were put, as on any ignite engine.
"""

from __future__ import annotations

import functools
import logging
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ignite.engine import Engine, EventsList, State
from ignite.engine.events import CallableEventWithFilter, RemovableEventHandle

from hookbus.engine.bus.events import EVENT_COUNTERS, SSLEvents
from hookbus.engine.bus.handler_order import forget_removed, place_newest
from hookbus.engine.bus.metric_names import metric_kept_apart, taken_metric_names
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState

Handler = Callable[[Engine], Any]
"""A handler as :meth:`BusEngine.handlers` gives it: with the engine as its only argument."""


class BusEngine(Engine):
    """An ignite ``Engine`` with the SSL events registered and handlers in priority order.

    Example::

        engine = BusEngine(train_step)
        engine.add_event_handler(SSLEvents.ON_STEP(every=10), lambda e: print(e.state.loss))
        with engine.at_priority(Priority.LAST):
            ProgressBar().attach(engine)  # its handlers run after every hook's
    """

    state: RunState
    """The run state: ignite's ``State`` with hookbus's fields (:class:`RunState`)."""

    runs_phases = True
    """The trainer's engine (or a :class:`hookbus.FakeEngine`): the trainer sets the
    run-state fields hooks read (``Hook.run_fields``), so attaching checks none."""

    def __init__(self, process_function: Callable[[RunEngine, Any], Any]) -> None:
        self._loaded_iteration: int | None = None
        self._placing: tuple[int, str | None] = (Priority.NORMAL, None)
        super().__init__(process_function)  # type: ignore[arg-type]  # called with this engine
        self.logger = logging.getLogger(ENGINE_LOGGER)
        self.register_events(*SSLEvents, event_to_attr=dict(EVENT_COUNTERS))
        self.state = RunState()

    @contextmanager
    def at_priority(self, priority: int, *, name: str | None = None) -> Iterator[None]:
        """Handlers added inside the block run at ``priority`` among their event's handlers.

        For ignite's handlers, metrics and loggers, whose ``attach`` registers handlers
        itself; lower runs first (see :class:`hookbus.Priority`). ``name`` names them in
        the hook plan.

        Example::

            with trainer.engine.at_priority(Priority.FIRST):
                TerminateOnNan().attach(...)  # or engine.add_event_handler(...)
        """
        saved = self._placing
        self._placing = (int(priority), name)
        try:
            yield
        finally:
            self._placing = saved

    def add_event_handler(
        self, event_name: Any, handler: Callable, *args: Any, **kwargs: Any
    ) -> RemovableEventHandle:
        """ignite's ``add_event_handler``; the handler takes its place by priority.

        Raises ValueError for a filter on an event without a counter (see
        :data:`hookbus.engine.bus.events.EVENT_COUNTERS`).
        """
        if isinstance(event_name, EventsList):
            return super().add_event_handler(event_name, handler, *args, **kwargs)
        _check_filter(event_name)
        args = metric_kept_apart(handler, args, taken_metric_names(self.state))
        handle = super().add_event_handler(event_name, handler, *args, **kwargs)
        priority, name = self._placing
        place_newest(self, event_name, priority, name)
        return handle

    def keep_metrics_apart(self) -> None:
        """Give the ignite metrics already attached under a name that hookbus now records
        itself (a meter's value, known once ``trainer.setup()`` built the meters) the
        ``ignite/`` prefix, as :meth:`add_event_handler` does for those attached later."""
        taken = taken_metric_names(self.state)
        for entries in self._event_handlers.values():
            for index, (handler, args, kwargs) in enumerate(entries):
                # ignite stored a weak reference to the engine before the handler's own
                # arguments when the handler takes the engine (Metric.completed does).
                ref = args[:1] if args and isinstance(args[0], weakref.ref) else ()
                own = args[len(ref) :]
                kept = metric_kept_apart(handler, own, taken)
                if kept is not own:
                    entries[index] = (handler, (*ref, *kept), kwargs)

    def remove_event_handler(self, handler: Callable, event_name: Any) -> None:
        """ignite's ``remove_event_handler``; the handler's place is forgotten."""
        super().remove_event_handler(handler, event_name)
        forget_removed(self)

    def handlers(self, event: Any) -> list[Handler]:
        """The handlers of ``event`` in the order they run, each a callable of the engine
        called as ignite's ``fire_event`` would (for a caller that must run them one by
        one, such as on_exception)."""
        return [_engine_call(*entry) for entry in self._event_handlers.get(event, ())]

    def load_state_dict(self, state_dict: Any) -> None:
        """ignite's ``load_state_dict`` (what ``Checkpoint.load_objects`` calls for an
        engine); the train iteration it set is kept for the trainer, which refuses to run
        from counters that are not hookbus's own resume point."""
        super().load_state_dict(state_dict)
        self._loaded_iteration = int(self.state.iteration)

    def take_loaded_counters(self) -> int | None:
        """The train iteration the last ``load_state_dict`` set (None without one since
        the last call); the next call returns None."""
        loaded, self._loaded_iteration = self._loaded_iteration, None
        return loaded

    def run(self, *args: Any, **kwargs: Any) -> State:
        """Refused: hookbus runs the phases itself. Call ``SSLTrainer.train()``."""
        raise RuntimeError(
            "the hookbus engine runs no ignite loop of its own: call trainer.train() "
            "(SSLTrainer.train), which runs the config's train and test phases and fires "
            "ignite's events (STARTED, EPOCH_*, ITERATION_*, COMPLETED) around them"
        )

    def set_data(self, data: Any) -> None:
        """Refused: a hookbus phase reads the data loader the trainer built for its kind
        (train or test), from the config or ``SSLTrainer(train_data=..., test_data=...)``,
        so that a resumed run reads the same samples in the same order; a loader swapped
        in mid-run would be lost at the resume."""
        raise RuntimeError(
            "engine.set_data() is not supported by hookbus: each phase reads the data the "
            "trainer built from the config (data.*) or from SSLTrainer(train_data=..., "
            "test_data=...), so that a resumed run reads the same samples; pass the data "
            "there, or train a second run on it from this run's checkpoint"
        )

    def interrupt(self) -> None:
        """Refused: ignite's pause-and-resume of ``run()`` in the same process has no
        counterpart in a hookbus run; ``terminate()`` ends it, and the run goes on from
        its checkpoint with ``trainer.resume_stopped=true``."""
        raise RuntimeError(
            "engine.interrupt() is not supported by hookbus: call engine.terminate() to end "
            "the run at the next step (a checkpoint is written), then run again with "
            "trainer.resume_stopped=true to go on"
        )

    def terminate(self, skip_completed: bool = False) -> None:
        """ignite's ``terminate()``: the run ends at the next step boundary. Records the
        caller in ``state.stopped_by`` (the first request wins)."""
        super().terminate(skip_completed)
        if self.state.stopped_by is None:
            self.state.stopped_by = f"terminate() in {_caller()}"

    def _handler_wrapper(
        self, handler: Callable, event_name: Any, event_filter: Callable
    ) -> Callable:
        """ignite's wrapper of a filtered handler, its filter reading the event's firing
        counter (:data:`hookbus.engine.bus.events.EVENT_COUNTERS`); ``get_event_attrib_value``
        gives a phase event's global step instead (the epoch)."""

        @functools.wraps(handler)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if event_filter(self, self.state.filter_count(event_name)):
                return handler(*args, **kwargs)
            return None

        wrapper._parent = weakref.ref(handler)  # type: ignore[attr-defined]  # ignite's has_event_handler
        return wrapper


ENGINE_LOGGER = "hookbus.ignite"
"""The name of ``engine.logger`` on a :class:`BusEngine`: a child of the ``hookbus``
logger, whose handlers write the run's ``log.txt`` and the console."""


def _check_filter(event: Any) -> None:
    if not isinstance(event, CallableEventWithFilter) or event.filter is None:
        return
    if event in State.event_to_attr:
        return
    raise ValueError(
        f"{event.name} fires at most once per run or has no counter, so a filter "
        "(every/once/before/after/event_filter) on it has nothing to count: attach the "
        f"handler to the event without a filter. Events that take filters: "
        f"{', '.join(event.name for event in EVENT_COUNTERS)} and ignite's STARTED, "
        "EPOCH_*, ITERATION_*, GET_BATCH_*, COMPLETED"
    )


def _caller() -> str:
    """The function that called ``terminate()``: ``EarlyStopping.__call__``, say."""
    frame = sys._getframe(2)
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


def _engine_call(handler: Callable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Handler:
    """``handler`` as a callable of the engine alone, as ignite would have called it.

    ignite stores a weak reference to the engine as the first argument of handlers that
    take the engine, and nothing for those that do not; extra arguments follow.
    """
    takes_engine = bool(args) and isinstance(args[0], weakref.ref)
    extra = args[1:] if takes_engine else args
    if takes_engine and not extra and not kwargs:
        return handler
    if takes_engine:
        return lambda engine: handler(engine, *extra, **kwargs)
    return lambda engine: handler(*extra, **kwargs)


IGNITE_STATE_KEYS: tuple[str, ...]
IGNITE_STATE_KEYS = ("iteration", "epoch", "max_epochs", "max_iters", "epoch_length")
IGNITE_STATE_KEYS += ("dataloader", "seed", "metrics", "output", "batch", "times")


def prepare_engine(engine: Engine) -> Engine:
    """Make any ignite ``engine`` ready for hookbus hooks; returns it.

    Registers the SSL events (with the counters their filters read) and puts a
    :class:`RunState` in place of ``engine.state``, keeping ignite's fields
    (``iteration``, ``epoch``, ``metrics``...) as they were. A filter on an SSL event
    (``SSLEvents.ON_STEP(every=2)``) counts that event's firings through
    ``engine.fire_event`` (``state.ssl_firings``), whatever counters the process
    function keeps. A hook that needs fields only the trainer sets (``run_dir``,
    ``phases``...: ``Hook.run_fields``) refuses to attach until they are set. Hooks
    attached afterwards run in priority order among the engine's handlers; firing the
    SSL events is up to the engine's process function (as the standard train step
    does). Calling it twice changes nothing.

    Example::

        trainer = Engine(my_step)
        prepare_engine(trainer)
        TimingHook().attach(trainer)
    """
    missing = [event for event in SSLEvents if not engine.has_registered_events(event)]
    if missing:
        engine.register_events(*missing, event_to_attr=dict(EVENT_COUNTERS))
    if not isinstance(engine.state, RunState):
        old = engine.state
        engine.state = RunState()
        for key in IGNITE_STATE_KEYS:
            if hasattr(old, key):
                setattr(engine.state, key, getattr(old, key))
    if not isinstance(engine, BusEngine) and engine.state.ssl_firings is None:
        engine.state.ssl_firings = dict.fromkeys(SSLEvents, 0)
        engine.fire_event = _counting(engine.fire_event, engine)  # type: ignore[method-assign,assignment]
    return engine


def _counting(fire_event: Callable[[Any], None], engine: Engine) -> Callable[[Any], None]:
    """``fire_event`` that first counts each SSL event in ``state.ssl_firings``: what
    filters on SSL events read on a prepared engine, whose process function need not
    advance the trainer's counters."""

    def fire(event_name: Any) -> None:
        firings = getattr(engine.state, "ssl_firings", None)
        if firings is not None and event_name in firings:
            firings[event_name] += 1
        fire_event(event_name)

    return fire

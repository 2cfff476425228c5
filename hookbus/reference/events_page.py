"""The events reference page: when each SSL event fires, its filter counter, its hooks."""

from __future__ import annotations

from hookbus.engine.bus.events import EVENT_COUNTERS, IGNITE_EVENTS, IGNITE_EVENTS_DOC, SSLEvents
from hookbus.engine.bus.priorities import priority_label
from hookbus.reference.docstrings import find_table, prose, summary_line
from hookbus.reference.hooks_page import hook_classes, subscribed_events


def event_descriptions() -> dict[str, str]:
    """``{event name: when it fires}``, read from the table in ``SSLEvents``' docstring."""
    table = find_table(SSLEvents.__doc__)
    rows = table.rows if table is not None else []
    return {row[0].strip("`"): row[1] for row in rows}


def undocumented_events() -> list[str]:
    """The events that the ``SSLEvents`` docstring table does not describe."""
    described = event_descriptions()
    return [event.value for event in SSLEvents if not described.get(event.value)]


def events_markdown() -> str:
    """The events page (docs/reference/events.md)."""
    described = event_descriptions()
    subscribers: dict[SSLEvents, list[str]] = {event: [] for event in SSLEvents}
    for name, hook_class in sorted(hook_classes().items(), key=lambda item: item[1].priority):
        for event in subscribed_events(hook_class):
            subscribers[event].append(f"`{name}` ({priority_label(hook_class.priority)})")
    lines = [
        "# Events",
        "",
        "Generated from `engine/bus/events.py` and the hook classes by `make docs-reference`.",
        "",
        prose(summary_line(SSLEvents.__doc__)),
        "Events are listed in the order a run meets them; a test phase fires",
        "`on_phase_start`, `on_forward`, `on_loss_and_meter`, `on_step` and `on_phase_end`.",
        "",
        "The *counter* is the run-state field that ignite's event filters count for the",
        "event. It is advanced before the event fires, so it counts the event's firings in",
        "the run: `SSLEvents.ON_UPDATE(every=3)` runs a handler on the 3rd, 6th, 9th",
        "optimizer step. Events without a counter fire at most once per run; a filter on",
        "them is refused when the handler is attached.",
        "",
        "| event | fires | counter | hookbus hooks (priority) |",
        "|---|---|---|---|",
    ]
    for event in SSLEvents:
        counter = EVENT_COUNTERS.get(event)
        lines.append(
            f"| `{event.value}` | {prose(described.get(event.value, ''))} "
            f"| {f'`{counter}`' if counter else '-'} "
            f"| {', '.join(subscribers[event]) or '-'} |"
        )
    lines += [
        "",
        "## ignite's own events",
        "",
        "The trainer's engine is an ignite `Engine`: ignite's events fire too, at these",
        "points, so ignite's handlers, metrics and loggers work on it (see",
        "[ignite's handlers on hookbus](../guides/ignite-handlers.md)).",
        "",
        prose(IGNITE_EVENTS_DOC),
        "",
        "| ignite event | fires in a hookbus run |",
        "|---|---|",
    ]
    lines += [f"| `{event.name}` | {when} |" for event, when in IGNITE_EVENTS.items()]
    return "\n".join(lines) + "\n"

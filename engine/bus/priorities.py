"""Named priorities: where a handler runs among the handlers of one event.

Lower runs first; handlers of equal priority run in the order they were attached. A
hook sets its level as a class attribute (``priority = Priority.REPORT``) or per
instance (``MyHook(priority=Priority.LAST)``); any integer works too, and a hook that
must run just after another of its level adds a little to it (``Priority.METHOD + 10``).

==========  =======  ================================================================
level       value    for
==========  =======  ================================================================
``FIRST``   -100     what every later handler of the event relies on: the meter sync,
                     which makes the phase's metrics final before anyone reads them
``HIGH``    -50      checks and measurements others read in the same event: the NaN
                     check (stops a bad step before anything acts on it), timing
``METHOD``  -30      the SSL method's hooks, which change the model or its state: the
                     momentum teacher, then queues and centres, then prototypes
``NORMAL``  0        a hook that does not say
``REPORT``  10       what reports on the run: log, progress bar, metrics.json,
                     TensorBoard, curves, the evaluation report
``LOW``     90       housekeeping after the reports: the CUDA cache
``LAST``    100      what must see every other handler's work: the checkpoint
==========  =======  ================================================================
"""

from __future__ import annotations

from enum import IntEnum


class Priority(IntEnum):
    """The named levels of handler priority; lower runs first (see the module's table)."""

    FIRST = -100
    HIGH = -50
    METHOD = -30
    NORMAL = 0
    REPORT = 10
    LOW = 90
    LAST = 100


def priority_label(priority: int) -> str:
    """``priority`` named by its level: ``"REPORT"``, ``"HIGH+10"``, ``"FIRST-5"``.

    A value between two levels is named from the level below it; one below ``FIRST``
    from ``FIRST``.
    """
    levels = sorted(Priority, key=int)
    below = [level for level in levels if level <= priority]
    level = below[-1] if below else levels[0]
    offset = int(priority) - int(level)
    if offset == 0:
        return level.name
    return f"{level.name}{offset:+d}"

"""The timing hook: time left in the run and the share of step time spent waiting for data."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.state import RunState
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self


def _kind(train: bool) -> str:
    return "train" if train else "test"


@register_hook("timing")
class TimingHook(Hook):
    """Estimates the time left in the run and the data-wait share of the current phase.

    The estimate is wall-clock time, from the first step of the run on: each step is
    charged the time since the one before it (the first step of a phase, since the
    phase started), and the time between a phase's last step and the next phase's start
    (meter sync, checkpoints, the next phase's meter preparation, such as the kNN
    meter's pass over the train set) is charged to the phase that starts. Train and
    test steps are priced apart (test steps are faster, and a test phase's meters cost
    more): seconds per step of a kind = the seconds charged to that kind over the steps
    of that kind done so far in the run. The time left prices every step left in the
    current phase and in every later phase of the plan, train and test; a kind not timed
    yet is priced as the other kind. The sums are checkpointed, so the estimate is right
    from the first step after a resume.

    ==================  ==============================  ===============================
    event               reads                           writes
    ==================  ==============================  ===============================
    ``on_phase_start``  --                              (charges the time since the
                                                        last step; resets the phase's
                                                        data-wait sums)
    ``on_step``         ``train``, ``batch_time``,      ``eta_seconds``,
                        ``data_time``, ``batches``,     ``data_wait_fraction``
                        ``phase_length``, ``phases``,
                        ``phase_idx``
    ==================  ==============================  ===============================

    ``eta_seconds`` = seconds per step of the current kind x (``phase_length -
    batches``) + the steps of ``phases[phase_idx + 1:]``, each at its kind's price; None
    until a step was timed (the log shows ``--``). ``data_wait_fraction`` = sum of
    ``data_time`` / sum of ``batch_time`` over the phase so far.

    The trainer appends to ``batch_time`` and ``data_time`` before ``on_step`` and
    empties them at each phase start. Priority -40: before the hooks that report the ETA.

    Example::

        TimingHook().attach(trainer.engine)
        # later, in any hook: engine.state.eta_seconds, engine.state.data_wait_fraction
        TimingHook(clock=lambda: 0.0)  # in tests: any function returning seconds
    """

    priority = Priority.HIGH + 10

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__()
        self.clock = clock
        self._seconds: dict[str, float] = {"train": 0.0, "test": 0.0}
        self._steps: dict[str, int] = {"train": 0, "test": 0}
        self._mark: float | None = None
        self._seen = 0
        self._batch_sum = 0.0
        self._data_sum = 0.0
        self._later_key: tuple[int, int, int] | None = None
        self._later: dict[bool, int] = {}

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The timing hook on the wall clock (the config has no timing keys)."""
        return cls()

    def on_phase_start(self, engine: RunEngine) -> None:
        now = self.clock()
        if self._mark is not None:
            self._seconds[_kind(engine.state.train)] += now - self._mark
        self._mark = now
        self._seen = 0
        self._batch_sum = 0.0
        self._data_sum = 0.0

    def on_step(self, engine: RunEngine) -> None:
        state = engine.state
        now = self.clock()
        kind = _kind(state.train)
        if self._mark is not None:
            self._seconds[kind] += now - self._mark
            self._steps[kind] += 1
        self._mark = now
        self._batch_sum += sum(state.batch_time[self._seen :])
        self._data_sum += sum(state.data_time[self._seen :])
        self._seen = len(state.batch_time)
        state.data_wait_fraction = self._data_sum / self._batch_sum if self._batch_sum else 0.0
        state.eta_seconds = self._seconds_left(state)

    def seconds_per_step(self, train: bool) -> float | None:
        """The run's mean wall-clock seconds per step of the kind ``train`` (the other
        kind's when this one has no timed step yet); None before any timed step."""
        for kind in (_kind(train), _kind(not train)):
            if self._steps[kind]:
                return self._seconds[kind] / self._steps[kind]
        return None

    def _seconds_left(self, state: RunState) -> float | None:
        here = self.seconds_per_step(state.train)
        if here is None:
            return None
        seconds = max(state.phase_length - state.batches, 0) * here
        for train, steps in self._later_steps(state).items():
            if steps:
                seconds += steps * (self.seconds_per_step(train) or 0.0)
        return seconds

    def _later_steps(self, state: RunState) -> dict[bool, int]:
        """Steps of the phases after the current one, by kind (train or not), counted once
        per phase rather than at every step."""
        key = (id(state.phases), len(state.phases), state.phase_idx)
        if self._later_key != key:
            later = {True: 0, False: 0}
            for phase in state.phases[state.phase_idx + 1 :]:
                later[bool(phase.train)] += phase.length
            self._later_key, self._later = key, later
        return self._later

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": dict(self._seconds), "steps": dict(self._steps)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "seconds_per_step" in state:  # a checkpoint from before: one average per kind
            averages = state["seconds_per_step"]
            self._steps = {kind: int(averages.get(kind) is not None) for kind in self._steps}
            self._seconds = {kind: averages.get(kind) or 0.0 for kind in self._seconds}
            return
        self._seconds = {kind: float(state["seconds"][kind]) for kind in self._seconds}
        self._steps = {kind: int(state["steps"][kind]) for kind in self._steps}

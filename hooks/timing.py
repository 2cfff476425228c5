"""The timing hook: time left in the run and the share of step time spent waiting for data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ignite.engine import Engine

from hookbus.engine.config import Config
from hookbus.engine.hook import Hook
from hookbus.engine.priorities import Priority
from hookbus.hooks.registry import register_hook

if TYPE_CHECKING:
    from typing_extensions import Self


def _kind(train: bool) -> str:
    return "train" if train else "test"


@register_hook("timing")
class TimingHook(Hook):
    """Estimates the time left in the run and the data-wait share of the current phase.

    Train and test steps are timed apart (test steps are faster): each kind keeps an
    exponential moving average of its seconds per step. The time left is the rest of the
    current phase plus every later phase of the plan, each step priced at the average of
    its kind; a kind not timed yet is priced at the other kind's average. The averages
    are checkpointed, so the estimate is right from the first step after a resume.

    ==================  ==============================  ===============================
    event               reads                           writes
    ==================  ==============================  ===============================
    ``on_phase_start``  --                              (resets the phase's sums)
    ``on_step``         ``train``, ``batch_time``,      ``eta_seconds``,
                        ``data_time``, ``batches``,     ``data_wait_fraction``
                        ``phase_length``, ``phases``,
                        ``phase_idx``
    ==================  ==============================  ===============================

    ``eta_seconds`` = smoothed seconds per step x steps left (``phase_length - batches``
    plus the lengths of ``phases[phase_idx + 1:]``); ``data_wait_fraction`` = sum of
    ``data_time`` / sum of ``batch_time`` over the phase so far.

    The trainer appends to ``batch_time`` and ``data_time`` before ``on_step`` and
    empties them at each phase start. Priority -40: before the hooks that report the ETA.

    Example::

        TimingHook(smoothing=0.1).attach(trainer.engine)
        # later, in any hook: engine.state.eta_seconds, engine.state.data_wait_fraction
    """

    priority = Priority.HIGH + 10

    def __init__(self, smoothing: float = 0.1) -> None:
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        super().__init__()
        self.smoothing = smoothing
        self._averages: dict[str, float | None] = {"train": None, "test": None}
        self._seen = 0
        self._batch_sum = 0.0
        self._data_sum = 0.0
        self._later_key: tuple[int, int, int] | None = None
        self._later: dict[bool, int] = {}

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The timing hook with its default smoothing (the config has no timing keys)."""
        return cls()

    def on_phase_start(self, engine: Engine) -> None:
        self._seen = 0
        self._batch_sum = 0.0
        self._data_sum = 0.0

    def on_step(self, engine: Engine) -> None:
        state = engine.state
        new_batch_times = state.batch_time[self._seen :]
        kind = _kind(state.train)
        for seconds in new_batch_times:
            average = self._averages[kind]
            self._averages[kind] = (
                seconds if average is None else average + self.smoothing * (seconds - average)
            )
        self._batch_sum += sum(new_batch_times)
        self._data_sum += sum(state.data_time[self._seen :])
        self._seen = len(state.batch_time)
        state.data_wait_fraction = self._data_sum / self._batch_sum if self._batch_sum else 0.0
        state.eta_seconds = self._seconds_left(state)

    def _seconds_per_step(self, train: bool) -> float:
        own = self._averages[_kind(train)]
        if own is not None:
            return own
        other = self._averages[_kind(not train)]
        return other if other is not None else 0.0

    def _seconds_left(self, state: Any) -> float:
        seconds = max(state.phase_length - state.batches, 0) * self._seconds_per_step(state.train)
        later = self._later_steps(state)
        return seconds + sum(later[train] * self._seconds_per_step(train) for train in later)

    def _later_steps(self, state: Any) -> dict[bool, int]:
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
        return {"seconds_per_step": dict(self._averages)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._averages = dict(state["seconds_per_step"])

"""The progress-bar hook: a tqdm bar per phase on an interactive terminal."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from tqdm import tqdm

from hookbus.engine.bus.hook import Hook
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.phases import epoch_label
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.parts.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self


def bar_description(train: bool, train_phase_idx: int, train_phase_count: int) -> str:
    """The bar's label: ``epoch 3/40`` for a train phase, ``test after epoch 3/40`` for a
    test phase (``test`` when no epoch came before it: a ``trainer.test_only`` run)."""
    epoch = epoch_label(train_phase_idx, train_phase_count)
    if train:
        return epoch
    return f"test after {epoch}" if train_phase_idx >= 0 else "test"


@register_hook("progress_bar")
class ProgressBarHook(Hook):
    """Draws one tqdm bar per phase, on rank 0, e.g. ``epoch 3/40: 45%|####5 | 90/200``.

    ==================  ========================================  ==========================
    event               reads                                     does
    ==================  ========================================  ==========================
    ``on_phase_start``  ``rank``, ``train``, ``train_phase_idx``,  opens the phase's bar
                        ``train_phase_count``, ``phase_length``,
                        ``batches``
    ``on_step``         ``batches``, ``loss``                     advances it; every
                                                                  ``postfix_frequency``
                                                                  steps shows the loss
    ``on_phase_end``    --                                        closes it
    ``on_end``,         --                                        closes it if still open
    ``on_exception``
    ==================  ========================================  ==========================

    Writes nothing to the run state. ``enabled=None`` draws bars only when the stream is a
    terminal; True or False force them on or off. Other ranks never draw. The loss postfix
    is the only device sync, once per ``postfix_frequency`` steps of a phase.

    Epochs are counted from 1, as in the log: a train phase's bar is ``epoch 3/40``, a
    test phase's ``test after epoch 3/40``. The console's log lines (the CLI's, and those
    ``SSLTrainer.train()`` shows) are written with the bar cleared and redrawn below them
    (:class:`hookbus.console.ConsoleHandler`), so a line never ends up glued to the bar;
    a handler of your own can do the same with ``tqdm.write`` or
    ``tqdm.external_write_mode``.

    Example::

        import io

        ProgressBarHook(postfix_frequency=10).attach(trainer.engine)
        ProgressBarHook(enabled=True, file=io.StringIO())  # in tests
    """

    priority = Priority.REPORT

    def __init__(
        self,
        enabled: bool | None = None,
        *,
        file: TextIO | None = None,
        postfix_frequency: int = 10,
    ) -> None:
        if postfix_frequency < 1:
            raise ValueError(f"postfix_frequency must be >= 1, got {postfix_frequency}")
        super().__init__()
        self.enabled = enabled
        self.file = file
        self.postfix_frequency = postfix_frequency
        self._bar: tqdm | None = None

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """An auto-enabled bar whose loss postfix follows ``cfg.trainer.log_frequency``."""
        return cls(postfix_frequency=cfg.trainer.log_frequency)

    def _stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def on_phase_start(self, engine: RunEngine) -> None:
        state = engine.state
        stream = self._stream()
        shown = self.enabled if self.enabled is not None else stream.isatty()
        if not shown or not self.is_rank_zero(engine):
            return
        self._bar = tqdm(
            total=state.phase_length,
            initial=state.batches,
            desc=bar_description(state.train, state.train_phase_idx, state.train_phase_count),
            file=stream,
            dynamic_ncols=True,
        )

    def on_step(self, engine: RunEngine) -> None:
        if self._bar is None:
            return
        state = engine.state
        self._bar.update(1)
        if state.batches % self.postfix_frequency == 0:
            loss = float(state.loss)  # type: ignore[arg-type]  # the step set it
            self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def on_phase_end(self, engine: RunEngine) -> None:
        self._close()

    def on_end(self, engine: RunEngine) -> None:
        self._close()

    def on_exception(self, engine: RunEngine) -> None:
        self._close()

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

"""The log hook: progress lines on the ``hookbus`` logger, copied to ``run_dir/log.txt``."""

from __future__ import annotations

import contextlib
import logging
import resource
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import torch

from hookbus.engine.bus.hook import Hook, rank_zero_only
from hookbus.engine.bus.hook_registry import register_hook
from hookbus.engine.bus.phases import epoch_label, phase_label
from hookbus.engine.bus.priorities import Priority
from hookbus.engine.bus.run_engine import RunEngine
from hookbus.engine.bus.run_stats import (
    format_eta,
    is_cuda,
    recent_batch_time,
)
from hookbus.engine.checkpoint.run_files import open_append
from hookbus.engine.errors import RESUME_HINT, LineHandler, writing
from hookbus.parts.config import Config, method_config

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("hookbus")

LOG_FILE = "log.txt"


def peak_memory_mb(device: Any) -> float:
    """Peak memory in MiB: CUDA memory allocated on a CUDA device, else the peak RSS."""
    if is_cuda(device):
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


@register_hook("log")
class LogHook(Hook):
    """Logs the run's progress on rank 0 and copies every line to ``run_dir/log.txt``.

    ==================  ===================================  ==================================
    event               reads                                logs
    ==================  ===================================  ==================================
    ``on_start``        ``run_dir``, ``resumed_from``,       where the run is and where it
                        ``device``, ``world_size``,          starts from, the weights file
                        ``phases``, ``cfg``                  its backbone loaded (or that a
                                                             linear evaluation's backbone is
                                                             random); opens ``log.txt``
    ``on_step``         ``train``, ``iteration``,            every ``log_frequency`` train
                        ``phase_idx``, ``phase_name``,       iterations: epoch, iteration,
                        ``train_phase_idx``, ``loss``,       loss, lr, mean batch time, data
                        ``lr``, ``batch_time``,              wait, ETA, peak memory
                        ``data_wait_fraction``,              (and the gradient norm when
                        ``eta_seconds``, ``max_iterations``, clipping is on)
                        ``grad_norm``, ``train_phase_count``
    ``on_phase_end``    ``phase_loss``, ``batches``,         the phase's data-wait share, mean
                        ``data_wait_fraction``, ``metrics``  loss and metrics
    ``on_end``          ``iteration``                        the end; closes ``log.txt``
    ``on_exception``    ``exception``                        the error (once ``on_start`` ran);
                                                             closes ``log.txt``
    ==================  ===================================  ==================================

    Writes nothing to the run state. ``log.txt`` is opened in append mode, so a resumed
    run continues it. A line that cannot be written (a full disk) stops the run with
    one line naming the file (:class:`~hookbus.engine.errors.WriteFailure`, exit status
    1), before the step's or phase's checkpoint, so a resumed run logs it again. Other
    ranks log nothing. The only device sync is ``float(loss)``
    on log lines. The file gets what the ``hookbus`` logger's level lets through; a logger
    nobody has configured (level NOTSET) is set to INFO while the file is open. Showing
    the lines on the console is the application's job (the CLI adds a handler).

    Example::

        LogHook(log_frequency=10).attach(trainer.engine)
        # phase 1/44 train | epoch 1/40 | iter 10/4000 | loss 4.1523 | lr 1.00e-04 | ...

    Phases and epochs are counted from 1 (``phase 3/44``, ``epoch 2/40``); checkpoint
    file names keep the 0-based phase index.
    """

    priority = Priority.REPORT
    run_fields = ("run_dir", "phases")

    def __init__(self, log_frequency: int) -> None:
        if log_frequency < 1:
            raise ValueError(f"log_frequency must be >= 1, got {log_frequency}")
        super().__init__()
        self.log_frequency = log_frequency
        self._file_handler: LineHandler | None = None
        self._saved_level = logging.NOTSET

    @classmethod
    def from_config(cls, cfg: Config) -> Self:
        """The log hook at ``cfg.trainer.log_frequency``."""
        return cls(log_frequency=cfg.trainer.log_frequency)

    @rank_zero_only
    def on_start(self, engine: RunEngine) -> None:
        state = engine.state
        self._open(Path(state.run_dir), Path(state.run_dir) / LOG_FILE)
        origin = f"resumed from {state.resumed_from}" if state.resumed_from else "fresh start"
        logger.info(
            "run %s (%s) | device %s | world size %d | %d phases",
            state.run_dir,
            origin,
            state.device,
            state.world_size,
            len(state.phases),
        )
        # A run's config is always there; a hook's unit test may give its engine none.
        for line in weights_lines(method_config(state.cfg)) if state.cfg is not None else ():
            logger.info("%s", line)

    @rank_zero_only
    def on_step(self, engine: RunEngine) -> None:
        if not self.every_n_train_iterations(engine, self.log_frequency):
            return
        state = engine.state
        grad = "" if state.grad_norm is None else f" | grad {float(state.grad_norm):.3g}"
        logger.info(
            "%s %s | %s | iter %d/%d | loss %.4f | lr %.2e%s | batch %.3fs"
            " | data %.0f%% | eta %s | mem %.0f MB",
            phase_label(state.phase_idx, len(state.phases)),
            state.phase_name,
            epoch_label(state.train_phase_idx, state.train_phase_count),
            state.iteration,
            state.max_iterations,
            float(state.loss),  # type: ignore[arg-type]  # the step set it
            state.lr,
            grad,
            recent_batch_time(state, self.log_frequency),
            100 * state.data_wait_fraction,
            format_eta(state.eta_seconds),
            peak_memory_mb(state.device),
        )

    @rank_zero_only
    def on_phase_end(self, engine: RunEngine) -> None:
        state = engine.state
        loss = state.phase_loss
        parts = [
            f"{phase_label(state.phase_idx, len(state.phases))} {state.phase_name} done",
            f"{state.batches} steps",
            f"data wait {100 * state.data_wait_fraction:.1f}%",
            "mean loss n/a" if loss is None else f"mean loss {loss:.4f}",
            *(f"{name} {value:.4f}" for name, value in state.metrics.items()),
        ]
        logger.info(" | ".join(parts))

    def on_end(self, engine: RunEngine) -> None:
        if self.is_rank_zero(engine):
            logger.info("run finished after %d train iterations", engine.state.iteration)
        self._close()

    def on_exception(self, engine: RunEngine) -> None:
        state = engine.state
        # an error before on_start (a refused resume) is the caller's to report
        if self.is_rank_zero(engine) and self._file_handler is not None:
            where = (
                f"in {phase_label(state.phase_idx, len(state.phases))}"
                if state.phase_idx >= 0
                else "before its first phase"
            )
            logger.error(
                "run stopped %s at train iteration %d: %r",
                where,
                state.iteration,
                state.exception,
            )
        self._close()

    def _open(self, run_dir: Path, path: Path) -> None:
        with writing(path, RESUME_HINT):
            stream: TextIO = open_append(run_dir, path)
        handler = LineHandler(stream, str(path), RESUME_HINT)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self._file_handler = handler
        self._saved_level = logger.level
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)

    def _close(self) -> None:
        if self._file_handler is None:
            return
        handler, self._file_handler = self._file_handler, None
        logger.removeHandler(handler)
        handler.close()
        with contextlib.suppress(OSError):  # each line was flushed: closing writes nothing new
            handler.stream.close()
        logger.setLevel(self._saved_level)


def weights_lines(cfg: Config) -> list[str]:
    """The lines naming the weights file the backbone started from (each key that names
    one, with its absolute path), or saying that a linear evaluation or fine-tuning
    starts from a random backbone."""
    model = cfg.model
    lines = []
    for key, enabled, path in (
        ("model.backbone.weights", True, model.backbone.weights),
        ("model.linear_eval.checkpoint", model.linear_eval.enabled, model.linear_eval.checkpoint),
        ("model.fine_tune.checkpoint", model.fine_tune.enabled, model.fine_tune.checkpoint),
    ):
        if enabled and path is not None:
            lines.append(f"backbone weights loaded from {Path(path).resolve()} ({key})")
        elif enabled and key != "model.backbone.weights" and model.backbone.weights is None:
            lines.append(f"{key} is not set: the backbone is evaluated at its random init")
    return lines

"""The run state: the fields hooks and train steps read and write on ``engine.state``.

:class:`RunState` is ignite's ``State`` with hookbus's fields declared once, each with
its type, default and meaning, in :class:`RunFields`; the trainer's engine and
:class:`hookbus.FakeEngine` both carry one, so a hook sees the same names in a unit test
as in a real run. The values several hooks derive from the fields (the phase's mean
loss, the number of train phases) are properties computed here, once.

The loop's transitions are methods of :class:`RunState` too (``begin_phase``,
``begin_step``, ``end_step``, ``end_phase``, with ``add_loss`` and ``count_update`` for
the train step): the trainer, the standard train step and :class:`hookbus.FakeEngine`
move the counters through them, so a hook's unit test runs the real counter rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ignite.engine import State

from hookbus.engine.bus.events import PHASE_EVENTS
from hookbus.engine.config import Config

if TYPE_CHECKING:
    import torch

    from hookbus.engine.bus.hook import Hook
    from hookbus.engine.bus.phases import Phase


def _doc(text: str) -> dict[str, str]:
    """A field's metadata: what the field means (the reference page shows it)."""
    return {"doc": text}


@dataclass(eq=False, repr=False)
class RunFields:
    """hookbus's fields of the run state, each with its type, default and meaning.

    A field whose type does not admit ``None`` but whose default is ``None`` (``cfg``,
    ``run_dir``, ``model``, ``base_model``, ``loss_fn``, ``optimizer``) is one the
    trainer sets before ``on_start``: every hook and step sees it set in a run, and its
    type says so; on a :class:`hookbus.FakeEngine` a test sets the ones its hook reads.
    """

    cfg: Config = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc("the validated config (`hookbus.Config`)"),
    )
    run_dir: Path = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc("the run directory (`checkpoint.dir`)"),
    )
    rank: int = field(default=0, metadata=_doc("this process's rank"))
    world_size: int = field(default=1, metadata=_doc("number of processes"))
    device: torch.device | str = field(default="cpu", metadata=_doc("the device the step runs on"))
    phases: list[Phase] = field(
        default_factory=list,
        metadata=_doc("the phase plan: a list of `hookbus.engine.bus.phases.Phase`"),
    )
    phase_idx: int = field(
        default=-1, metadata=_doc("index of the current phase in `phases` (-1 before the first)")
    )
    train_phase_idx: int = field(
        default=-1, metadata=_doc("index of the current or last train phase")
    )
    train: bool = field(default=True, metadata=_doc("True in a train phase, False in a test phase"))
    phase_name: str = field(default="", metadata=_doc("'train' or 'test'"))
    iteration: int = field(
        default=0,
        metadata=_doc(
            "train steps begun in the run: the current one included while it runs (from 1, "
            "as ignite counts), the steps done after it"
        ),
    )
    local_iteration_num: int = field(
        default=0,
        metadata=_doc(
            "steps of any phase begun by this process, the current one included while it runs"
        ),
    )
    batches: int = field(default=0, metadata=_doc("steps done in the current phase"))
    phase_length: int = field(default=0, metadata=_doc("steps the current phase will take"))
    updates: int = field(
        default=0,
        metadata=_doc("optimizer steps taken in the whole run (counted before `on_update` fires)"),
    )
    max_iterations: int = field(default=0, metadata=_doc("train steps in the whole run"))
    batch_time: list[float] = field(
        default_factory=list,
        metadata=_doc("seconds per step in the current phase (data wait included)"),
    )
    data_time: list[float] = field(
        default_factory=list,
        metadata=_doc("seconds spent waiting for each batch of the current phase"),
    )
    last_batch: Any = field(
        default=None, metadata=_doc("the batch of the current step, on the device")
    )
    last_output: Any = field(default=None, metadata=_doc("the model's output of the current step"))
    loss: torch.Tensor | None = field(
        default=None, metadata=_doc("the step's loss, detached and averaged over ranks (a tensor)")
    )
    loss_sum: torch.Tensor | None = field(
        default=None, metadata=_doc("sum of `loss` over the current phase (a tensor, no sync)")
    )
    lr_scheduler: str | None = field(
        default=None,
        metadata=_doc(
            "class name of the ignite learning-rate scheduler attached to the engine, which "
            "then sets the learning rate instead of the config's schedule; None without one"
        ),
    )
    lr: float = field(default=0.0, metadata=_doc("learning rate of the first parameter group"))
    grad_norm: torch.Tensor | None = field(
        default=None,
        metadata=_doc(
            "global L2 norm of the gradients before clipping, at the last optimizer step "
            "(a tensor, no sync); None unless `optimizer.clip_grad_norm` is set"
        ),
    )
    model: torch.nn.Module = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc(
            "the model the step calls: DDP-wrapped when distributed, compiled with "
            "`model.compile.enabled`"
        ),
    )
    base_model: torch.nn.Module = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc(
            "the model without its DDP and compile wrappers: the module that owns the "
            "parameters, as checkpoints and exports hold it"
        ),
    )
    initial_backbone: torch.nn.Module | None = field(
        default=None,
        metadata=_doc(
            "a copy of the backbone given from Python, as given (the random init the "
            "evaluation report compares with); None for a backbone built by name"
        ),
    )
    teacher: torch.nn.Module | None = field(
        default=None,
        metadata=_doc(
            "the momentum teacher (an EMA of the model), set by the momentum_teacher hook at "
            "on_start; None without one (a hook that snapshots the teacher reads it)"
        ),
    )
    loss_fn: torch.nn.Module = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc("the loss module"),
    )
    optimizer: torch.optim.Optimizer = field(
        default=None,  # type: ignore[assignment]  # the trainer sets it before on_start
        metadata=_doc("the optimizer"),
    )
    scaler: torch.amp.GradScaler | None = field(
        default=None, metadata=_doc("the GradScaler for fp16 autocast, else None")
    )
    amp_dtype: torch.dtype | None = field(
        default=None, metadata=_doc("torch dtype of autocast, or None when off")
    )
    meters: list[Any] = field(
        default_factory=list,
        metadata=_doc("meters updated each step (`hookbus.parts.meters.Meter`)"),
    )
    metrics: dict[str, float] = field(
        default_factory=dict,
        metadata=_doc("after meter sync: {meter value name: float} of the phase"),
    )
    data_loaders: dict[str, Any] = field(
        default_factory=dict, metadata=_doc("{'train', 'test', 'memory'...: DataLoader}")
    )
    hooks: list[Hook] = field(
        default_factory=list, metadata=_doc("the hooks attached to this run, in attach order")
    )
    eta_seconds: float | None = field(
        default=None,
        metadata=_doc(
            "estimated seconds left in the run (timing hook); None until a step was timed"
        ),
    )
    data_wait_fraction: float = field(
        default=0.0, metadata=_doc("share of step time spent waiting for data")
    )
    exception: BaseException | None = field(
        default=None, metadata=_doc("the exception being handled in on_exception")
    )
    stop_requested: str | None = field(
        default=None,
        metadata=_doc("name of the signal that asked the run to stop after this step, or None"),
    )
    stopped_by: str | None = field(
        default=None,
        metadata=_doc(
            "what ended the run early through `engine.terminate()` (e.g. "
            "'terminate() in EarlyStopping.__call__'), or None"
        ),
    )
    history: list[dict[str, Any]] = field(
        default_factory=list,
        metadata=_doc(
            "one record per phase this `train()` ran, as metrics.json keeps it: phase, "
            "iteration, mean loss and every metric"
        ),
    )
    resumed_from: str | None = field(
        default=None, metadata=_doc("path of the checkpoint this run resumed from, or None")
    )
    summary: dict[str, Any] = field(
        default_factory=dict, metadata=_doc("end-of-run results a hook wants to report")
    )


IGNITE_FIELDS: dict[str, str] = {
    "epoch": "train phases begun (ignite's epochs): set before `EPOCH_STARTED`",
    "max_epochs": "train phases in the plan (`optimizer.num_epochs`)",
    "epoch_length": "steps of a train phase",
    "iteration": "train steps begun in the run: inside a train step and its events, the "
    "number of the current step (from 1, as ignite counts); after it, steps done",
    "output": "what the train step returned: the standard step returns the step's loss, "
    "detached and averaged over ranks (`state.loss`, a 0-d tensor), as ignite's "
    "supervised trainer returns its loss",
    "batch": "the batch of the current step, as the data loader gave it",
    "dataloader": "the data loader of the current phase",
    "metrics": "the phase's metrics: the meters' values after the meter sync, and what "
    "ignite metrics attached to the engine computed",
    "times": "seconds of the last train phase (`EPOCH_COMPLETED`) and of the run "
    "(`COMPLETED`), as ignite keeps them",
}
"""ignite's own ``State`` fields, and what they hold in a hookbus run."""

RUN_STATE_FIELDS: dict[str, dataclasses.Field] = {
    spec.name: spec for spec in dataclasses.fields(RunFields)
}
"""``{name: field}`` of :class:`RunFields`; ``field.metadata["doc"]`` says what it means."""


class RunState(RunFields, State):
    """ignite's ``State`` with hookbus's run-state fields (:class:`RunFields`) laid on it.

    ``RunState(**values)`` starts every field at its default, then sets ``values``; an
    unknown name is a TypeError. ignite's own fields (``epoch``, ``max_epochs``,
    ``epoch_length``, ``output``, ``batch``, ``times``...) are there as ignite sets them.

    Example::

        state = RunState(iteration=9, train=True)
        state.phase_loss  # None: no step of the phase yet
    """

    def __init__(self, **values: Any) -> None:
        State.__init__(self)
        RunFields.__init__(self, **values)
        self._phase_loss_of: tuple[Any, int] = (None, 0)
        self._phase_loss: float | None = None
        self.ssl_firings: dict[Any, int] | None = None
        """On an engine made ready by ``prepare_engine``: how often each SSL event fired,
        the value its filters read; None on the trainer's engine, whose counters are
        that value (``EVENT_COUNTERS``)."""

    def get_event_attrib_value(self, event_name: Any) -> int:
        """The global step of ``event_name``, as ignite's ``global_step_from_engine`` and
        loggers read it: the count a filter on it reads (ignite's; the firings of an SSL
        event on a prepared plain engine), but for ``on_phase_start`` and
        ``on_phase_end`` the epoch, train phases begun (a test phase after epoch 2 is
        2), as an evaluator's results are named by the trainer's epoch in ignite."""
        firings = self.ssl_firings
        if firings is not None and event_name in firings:
            return firings[event_name]
        if event_name in PHASE_EVENTS:
            return self.train_phase_idx + 1
        return State.get_event_attrib_value(self, event_name)

    def filter_count(self, event_name: Any) -> int:
        """The count a filter on ``event_name`` reads on the trainer's engine: the
        counter of :data:`hookbus.engine.bus.events.EVENT_COUNTERS` (phases begun for the
        phase events), or ignite's for its own events."""
        return State.get_event_attrib_value(self, event_name)

    @property
    def phase_loss(self) -> float | None:
        """Mean loss of the current phase so far (``loss_sum / batches``), None before its
        first step. Reading it reads ``loss_sum`` on the host (a device sync) once per
        value of ``loss_sum``: every hook that reads it at a phase end shares one sync."""
        if self.batches == 0 or self.loss_sum is None:
            return None
        read_sum, read_batches = self._phase_loss_of
        if read_sum is not self.loss_sum or read_batches != self.batches:
            self._phase_loss = float(self.loss_sum) / self.batches
            self._phase_loss_of = (self.loss_sum, self.batches)
        return self._phase_loss

    @property
    def phase_number(self) -> int:
        """Phases begun in the run, the current one included (``phase_idx + 1``): the
        counter that filters on ``on_phase_start`` and ``on_phase_end`` read."""
        return self.phase_idx + 1

    @property
    def train_phase_count(self) -> int:
        """Number of train phases in the phase plan ``phases``."""
        return sum(1 for phase in self.phases if phase.train)

    def start_over(self) -> None:
        """Put the counters and records back to those of a fresh start; the trainer's
        ``setup()`` then restores the newest checkpoint, if any, over them."""
        self.phase_idx = self.train_phase_idx = -1
        self.iteration = self.local_iteration_num = self.updates = self.batches = 0
        self.epoch = 0
        self.loss_sum = self.stopped_by = self.resumed_from = self.output = None
        self.history = []
        self.summary = {}
        self.metrics = {}

    def take_plan(self, phases: list[Phase], *, epoch_length: int) -> None:
        """Take the phase plan, and the sizes ignite reads from it: ``max_iterations``
        (the plan's train steps), ``max_epochs`` (its train phases), ``epoch_length``
        (the steps of a train phase) and no ``max_iters``."""
        self.phases = phases
        self.max_iterations = sum(phase.length for phase in phases if phase.train)
        self.max_epochs = self.train_phase_count
        self.epoch_length = epoch_length
        self.max_iters = None

    def begin_phase(
        self, phase_idx: int, meters: Sequence[Any], *, batches_done: int | None = None
    ) -> Phase:
        """Enter phase ``phase_idx`` of ``phases``, before ``on_phase_start``; returns it.

        Sets the phase fields (``phase_idx``, ``train``, ``phase_name``,
        ``phase_length``), clears the phase's step times and metrics, and keeps the
        ``meters`` of its kind (``meter.phases``) as ``state.meters``. A fresh phase
        (``batches_done`` None) advances ``train_phase_idx`` when it trains, clears
        ``loss_sum`` and resets the meters; a phase resumed inside keeps the restored
        ones and starts counting at ``batches_done``.
        """
        phase = self.phases[phase_idx]
        fresh = batches_done is None
        self.phase_idx = phase_idx
        self.train = phase.train
        self.phase_name = phase.kind
        if phase.train and fresh:
            self.train_phase_idx += 1
        self.phase_length = phase.length
        self.batches = batches_done or 0
        self.batch_time = []
        self.data_time = []
        self.metrics = {}
        self.meters = [meter for meter in meters if phase.kind in meter.phases]
        if fresh:
            self.loss_sum = None
            for meter in self.meters:
                meter.reset()
        return phase

    def begin_step(self) -> None:
        """Count the step about to run: ``iteration`` in a train phase (ignite's count,
        after ``GET_BATCH_COMPLETED`` and before ``ITERATION_STARTED``) and
        ``local_iteration_num``."""
        if self.train:
            self.iteration += 1
        self.local_iteration_num += 1

    def add_loss(self, loss: torch.Tensor) -> None:
        """Keep the step's loss (detached, averaged over ranks) as ``loss`` and add it to
        the phase's ``loss_sum``, before ``on_loss_and_meter``."""
        self.loss = loss
        self.loss_sum = loss if self.loss_sum is None else self.loss_sum + loss

    def count_update(self) -> None:
        """Count an optimizer step in ``updates``, before ``on_update``."""
        self.updates += 1

    def end_step(self, output: Any, *, batch_time: float, data_time: float) -> None:
        """Close the step that just ran, before ``on_step``: ``output`` is what the train
        step returned; ``batches`` counts the step; its seconds (data wait included) and
        its seconds of data wait join ``batch_time`` and ``data_time``."""
        self.output = output
        self.batches += 1
        self.batch_time.append(batch_time)
        self.data_time.append(data_time)

    def phase_record(self) -> dict[str, Any]:
        """The phase's summary as ``metrics.json``, the curves and ``history`` keep it:
        phase index and name, train flag, train phase index, iteration, mean loss
        (``phase_loss``), and every metric."""
        return {
            "phase_idx": self.phase_idx,
            "phase": self.phase_name,
            "train": self.train,
            "train_phase_idx": self.train_phase_idx,
            "iteration": self.iteration,
            "loss": self.phase_loss,
            **self.metrics,
        }

    def end_phase(self) -> None:
        """Close the phase, after ``on_phase_end``: its record joins ``history``."""
        self.history.append(self.phase_record())

    def release_data(self) -> None:
        """Drop the data loaders, the current loader and the last batch (the trainer
        does at the end of ``train()``, after an exception too)."""
        self.data_loaders = {}
        self.last_batch = None
        self.dataloader = None

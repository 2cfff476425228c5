"""Per-iteration cost of the bus: a hand-written loop, plain ignite, hookbus and Lightning.

    .venv/bin/python benchmarks/bench_bus.py            # 3000 iterations, 5 rounds
    .venv/bin/python benchmarks/bench_bus.py --quick    # a smoke run

Every contender trains the same tiny step (a Linear(8, 8) model, MSE loss, SGD) on the
same batches of the same DataLoader, and the frameworks call the same ten trivial
handlers per iteration (each counts its calls):

=================  ==================================================================
contender          how the step runs; where the ten handlers sit
=================  ==================================================================
hand loop          ``for x, y in loader``: forward, loss, zero_grad, backward, step
ignite             ``Engine.run``; the process function fires six custom events
                   (as in the issue that asked for this benchmark): handlers on
                   BATCH 1, FORWARD 2, LOSS 2, BACKWARD 1, UPDATE 2, STEP 2
hookbus            ``SSLTrainer.train`` with a registered train step firing the
                   standard step's events; handlers on on_forward 2,
                   on_loss_and_meter 2, on_backward 1, on_update 2, on_step 3 (five
                   events: hookbus has no event before the step); the task hook
                   (below) is its only hook
hookbus+defaults   the same, plus ``hookbus.default_hooks`` of the config: timing, NaN
                   check (a check every step), log, TensorBoard and summary plot
                   (every 10 iterations), metrics.json, meter sync, checkpoint
Lightning          ``Trainer.fit`` (CPU, no logger, checkpoint, progress bar or model
                   summary); ten callbacks: on_train_batch_start 1,
                   on_before_zero_grad 2, on_before_backward 2, on_after_backward 1,
                   on_before_optimizer_step 2, on_train_batch_end 2
=================  ==================================================================

hookbus gets the tiny task through the real trainer: a registered data set of the same
length lets it plan the phase, and a hook at ``on_start`` hands it the model, optimizer
and DataLoader used by every contender. Time per iteration is taken between the model
forwards of iteration ``--warmup`` and of the last iteration, so each framework's setup
and teardown are left out; both wall time and the process's CPU time are taken. CPU time
is what the ratios are judged on: it is what the framework costs, and it barely moves
when other processes compete for the cores (wall time is shown beside it). The
contenders run in alternation, ``--rounds`` times; a contender's overhead is the median
over rounds of its time minus the hand loop's time in the same round. Lightning is
skipped, with a note, when it is not installed (``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from ignite.engine import Engine, EventEnum
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (
    interleaved,
    machine,
    markdown_table,
    median,
    paired_median,
    quiet_training_log,
)
from hookbus import (
    DATASETS,
    Config,
    Hook,
    SSLEvents,
    SSLTrainer,
    default_hooks,
    register_train_step,
)
from hookbus.config import validate_config
from hookbus.engine.bus.handler_order import add_handler
from hookbus.parts.data import TensorImageDataset

BATCH_SIZE = 16
DATASET_NAME = "bench_bus_images"
STEP_NAME = "bench_bus_tiny_step"


class TinyModel(nn.Module):
    """Linear(8, 8) that stamps (wall time, process CPU time) at every forward call."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.stamps: list[tuple[float, float]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.stamps.append((time.perf_counter(), time.process_time()))
        return self.linear(x)


class Task:
    """The work of one contender's run: a fresh model, its SGD, the shared loader."""

    def __init__(self, loader: DataLoader) -> None:
        torch.manual_seed(0)
        self.loader = loader
        self.model = TinyModel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def seconds_per_iteration(self, warmup: int) -> tuple[float, float]:
        """Mean (wall, CPU) seconds between forwards, from iteration ``warmup`` to the last."""
        stamps = self.model.stamps
        if len(stamps) <= warmup + 1:
            raise RuntimeError(f"only {len(stamps)} iterations ran; lower --warmup")
        (wall_0, cpu_0), (wall_1, cpu_1) = stamps[warmup], stamps[-1]
        steps = len(stamps) - 1 - warmup
        return (wall_1 - wall_0) / steps, (cpu_1 - cpu_0) / steps


class Counter:
    """A trivial handler: counts its calls, whatever it is passed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


def make_loader(iterations: int) -> DataLoader:
    """``iterations`` batches of ``BATCH_SIZE`` (inputs, targets) pairs, in order."""
    generator = torch.Generator().manual_seed(0)
    count = iterations * BATCH_SIZE
    data = TensorDataset(torch.randn(count, 8, generator=generator), torch.randn(count, 8))
    return DataLoader(data, batch_size=BATCH_SIZE, shuffle=False, drop_last=True)


def run_hand_loop(task: Task) -> None:
    """The loop one writes by hand."""
    model, optimizer = task.model, task.optimizer
    for x, y in task.loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


class TinyEvents(EventEnum):
    """The ignite contender's custom events, fired by its process function."""

    BATCH = "batch"
    FORWARD = "forward"
    LOSS = "loss"
    BACKWARD = "backward"
    UPDATE = "update"
    STEP = "step"


IGNITE_HANDLERS: list[tuple[TinyEvents, int]] = [
    (TinyEvents.BATCH, 1),
    (TinyEvents.FORWARD, 2),
    (TinyEvents.LOSS, 2),
    (TinyEvents.BACKWARD, 1),
    (TinyEvents.UPDATE, 2),
    (TinyEvents.STEP, 2),
]


def run_ignite(task: Task) -> None:
    """A plain ignite Engine with six custom events carrying ten handlers."""
    model, optimizer = task.model, task.optimizer

    def process(engine: Engine, batch: Any) -> None:
        x, y = batch
        engine.fire_event(TinyEvents.BATCH)
        output = model(x)
        engine.fire_event(TinyEvents.FORWARD)
        loss = F.mse_loss(output, y)
        engine.fire_event(TinyEvents.LOSS)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        engine.fire_event(TinyEvents.BACKWARD)
        optimizer.step()
        engine.fire_event(TinyEvents.UPDATE)
        engine.fire_event(TinyEvents.STEP)

    engine = Engine(process)
    engine.register_events(*TinyEvents)
    for event, count in IGNITE_HANDLERS:
        for _ in range(count):
            engine.add_event_handler(event, Counter())
    engine.run(task.loader, max_epochs=1)


@DATASETS.register(DATASET_NAME)
def _phase_planning_images(cfg: Any) -> tuple[TensorImageDataset, TensorImageDataset]:
    """Blank 8x8 images, as many as the benchmark's batches hold: hookbus plans its phase
    from this data set's length (the task hook then hands it the shared DataLoader)."""
    images = torch.zeros(cfg.test_size, 1, 8, 8)
    labels = torch.zeros(cfg.test_size, dtype=torch.long)
    return TensorImageDataset(images, labels), TensorImageDataset(images[:1], labels[:1])


@register_train_step(STEP_NAME)
def tiny_train_step(engine: Engine, batch: Any) -> None:
    """The tiny step as a hookbus train step, firing the step's four inner events."""
    state = engine.state
    x, y = batch
    output = state.model(x)
    engine.fire_event(SSLEvents.ON_FORWARD)
    loss = F.mse_loss(output, y)
    state.loss = loss.detach()
    engine.fire_event(SSLEvents.ON_LOSS_AND_METER)
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    engine.fire_event(SSLEvents.ON_BACKWARD)
    state.optimizer.step()
    engine.fire_event(SSLEvents.ON_UPDATE)


class TinyTaskHook(Hook):
    """Hands the trainer the benchmark's model, optimizer and DataLoader at ``on_start``."""

    priority = -1000

    def __init__(self, task: Task) -> None:
        super().__init__()
        self.task = task

    def on_start(self, engine: Engine) -> None:
        state = engine.state
        state.base_model = state.model = self.task.model
        state.optimizer = self.task.optimizer
        state.data_loaders["train"] = self.task.loader


HOOKBUS_HANDLERS: list[tuple[SSLEvents, int]] = [
    (SSLEvents.ON_FORWARD, 2),
    (SSLEvents.ON_LOSS_AND_METER, 2),
    (SSLEvents.ON_BACKWARD, 1),
    (SSLEvents.ON_UPDATE, 2),
    (SSLEvents.ON_STEP, 3),
]


def hookbus_config(iterations: int, run_dir: Path) -> Config:
    """One train phase of ``iterations`` steps, no test phase, no meters."""
    return validate_config(
        {
            "trainer": {"train_step_name": STEP_NAME, "test_model": False},
            "data": {
                "name": DATASET_NAME,
                "image_size": 8,
                "batch_size": BATCH_SIZE,
                "test_size": iterations * BATCH_SIZE,
            },
            "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
            "optimizer": {"num_epochs": 1, "warmup_epochs": 0},
            "meters": {"knn": {"enabled": False}},
            "checkpoint": {"dir": str(run_dir), "auto_resume": False},
            "hooks": {"progress_bar": {"enabled": False}},
        },
        "bench_bus config",
    )


def run_hookbus(task: Task, *, with_defaults: bool) -> None:
    """``SSLTrainer.train`` on the tiny task, with the ten handlers on the bus."""
    iterations = len(task.loader)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = hookbus_config(iterations, Path(run_dir))
        hooks = [*default_hooks(cfg)] if with_defaults else []
        trainer = SSLTrainer(cfg, hooks=[*hooks, TinyTaskHook(task)])
        for event, count in HOOKBUS_HANDLERS:
            for _ in range(count):
                add_handler(trainer.engine, event, Counter(), name="counter")
        trainer.train()


def lightning_runner() -> Callable[[Task], None] | None:
    """The Lightning contender, or None when Lightning is not installed."""
    try:
        import lightning as L
    except ImportError:
        return None

    class TinyModule(L.LightningModule):
        def __init__(self, task: Task) -> None:
            super().__init__()
            self.net = task.model
            self.task = task

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return F.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return self.task.optimizer

    def callback(hook: str) -> L.Callback:
        counter = Counter()
        return type(f"Count_{hook}", (L.Callback,), {hook: lambda self, *a, **k: counter()})()

    placement = {
        "on_train_batch_start": 1,
        "on_before_zero_grad": 2,
        "on_before_backward": 2,
        "on_after_backward": 1,
        "on_before_optimizer_step": 2,
        "on_train_batch_end": 2,
    }

    def run(task: Task) -> None:
        trainer = L.Trainer(
            max_epochs=1,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            callbacks=[callback(hook) for hook, count in placement.items() for _ in range(count)],
        )
        trainer.fit(TinyModule(task), train_dataloaders=task.loader)

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="lightning")
    return run


def measure(
    run: Callable[[Task], None], loader: DataLoader, warmup: int
) -> Callable[[], tuple[float, float]]:
    """A contender for :func:`interleaved`: one run on a fresh task, (wall, CPU) seconds
    per iteration."""

    def once() -> tuple[float, float]:
        task = Task(loader)
        run(task)
        return task.seconds_per_iteration(warmup)

    return once


def main() -> None:
    quiet_training_log()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3000, help="iterations per run")
    parser.add_argument("--rounds", type=int, default=5, help="alternated runs per contender")
    parser.add_argument("--warmup", type=int, default=100, help="iterations left untimed")
    parser.add_argument("--quick", action="store_true", help="300 iterations, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.rounds, args.warmup = 300, 2, 20
    loader = make_loader(args.iterations)
    runners: dict[str, Callable[[Task], None]] = {
        "hand loop": run_hand_loop,
        "ignite": run_ignite,
        "hookbus": lambda task: run_hookbus(task, with_defaults=False),
        "hookbus+defaults": lambda task: run_hookbus(task, with_defaults=True),
    }
    lightning = lightning_runner()
    if lightning is not None:
        runners["Lightning"] = lightning
    times = interleaved(
        {name: measure(run, loader, args.warmup) for name, run in runners.items()}, args.rounds
    )
    wall = {name: [w for w, _ in values] for name, values in times.items()}
    cpu = {name: [c for _, c in values] for name, values in times.items()}
    wall_over = {name: paired_median(values, wall["hand loop"]) for name, values in wall.items()}
    cpu_over = {name: paired_median(values, cpu["hand loop"]) for name, values in cpu.items()}
    rows = [
        [
            name,
            f"{median(cpu[name]) * 1e6:.0f}",
            f"{cpu_over[name] * 1e6:.1f}",
            f"{median(wall[name]) * 1e6:.0f}",
            f"{wall_over[name] * 1e6:.1f}",
        ]
        for name in times
    ]
    print(f"bench_bus: {args.iterations} iterations x {args.rounds} rounds; {machine()}")
    header = ["contender", "CPU us/iter", "CPU overhead", "wall us/iter", "wall overhead"]
    print(markdown_table(header, rows))
    print()
    # No target: the bus fires through ignite's own dispatch (about 10 us an event here), a
    # cost that shows on this toy step only; bench_recipe.py holds a real step to the hand loop.
    ratio_rows = [
        [
            f"{bus} / {other}",
            f"{cpu_over[bus] / cpu_over[other]:.3f}",
            f"{wall_over[bus] / wall_over[other]:.3f}",
        ]
        for bus in ("hookbus", "hookbus+defaults")
        for other in ("ignite", "Lightning")
        if other in cpu_over
    ]
    print(markdown_table(["overhead ratio", "CPU", "wall"], ratio_rows))
    if lightning is None:
        print("\nLightning is not installed: its row is skipped (pip install -e .[bench]).")


if __name__ == "__main__":
    main()

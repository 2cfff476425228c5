"""The digits SimCLR epoch under hookbus against a hand-written loop doing the same work.

    .venv/bin/python benchmarks/bench_recipe.py            # 3 runs of 5 epochs
    .venv/bin/python benchmarks/bench_recipe.py --quick    # 1 run of 2 epochs

Both train ``configs/simclr_digits.yaml`` (no test phase, no evaluation report) and
build everything with hookbus's own builders, so the work is the same: the seeds and
``machine`` settings of the trainer, ``build_data_loaders`` (same sampler, batches and
augmentations), ``build_model`` right after seeding, ``build_loss``,
``build_optimizer``, and the learning rate of ``hookbus.parts.optim.learning_rate`` set every
step. The hand loop is forward, loss, zero_grad, backward, learning rate, step; hookbus
runs ``SSLTrainer.train`` with the recipe's default hooks (timing, NaN check, log,
metrics.json, TensorBoard, meter sync, checkpoint...). Their losses are compared at the
end: equal losses show that the two did the same computation.

The two run in lockstep, so that both see the same load on a shared machine: after each
hookbus step (its ``on_step`` handlers included), a last hook runs one step of the hand
loop. A hookbus step is timed from the end of the previous hand step (or the phase
start) to that hook; a hand step from asking for its batch to the optimizer step. An
epoch is the sum of its steps: the phase ends (meter sync, checkpoint, metrics) are not
in it. The first epoch of a run warms the process up (memory, kernel choices) for
whichever contender steps first and is left out. Wall and CPU time are taken. Ratios
are medians of paired ratios: hookbus's epoch over the hand loop's same epoch, and
hookbus's step over the hand step that follows it, over all timed epochs (steps) of
all ``--runs`` runs. ``--threads`` sets ``machine.num_threads`` for both (0: torch's
choice, as in the recipe; on a busy machine 1 thread gives steadier figures).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from ignite.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import machine, markdown_table, median, quiet_training_log
from hookbus import Config, Hook, SSLTrainer, default_hooks, load_config
from hookbus.engine.process.machine import configure_process
from hookbus.parts.data import build_data_loaders, set_loader_epoch
from hookbus.parts.losses import build_loss
from hookbus.parts.models import build_model
from hookbus.parts.optim import build_optimizer, learning_rate, set_learning_rate

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "simclr_digits.yaml"

Clock = tuple[float, float]
"""(wall seconds, process CPU seconds)."""


def now() -> Clock:
    """The wall clock and the process's CPU clock."""
    return time.perf_counter(), time.process_time()


def recipe(epochs: int, threads: int, run_dir: Path) -> Config:
    """The digits SimCLR recipe, ``epochs`` train phases and nothing else."""
    return load_config(
        RECIPE,
        [
            f"optimizer.num_epochs={epochs}",
            f"machine.num_threads={threads}",
            "trainer.test_model=false",
            "hooks.evaluation_report.enabled=false",
            "hooks.progress_bar.enabled=false",
            f"checkpoint.dir={run_dir}",
            "checkpoint.auto_resume=false",
        ],
    )


def elapsed(start: Clock, end: Clock) -> Clock:
    """The (wall, CPU) seconds from ``start`` to ``end``."""
    return end[0] - start[0], end[1] - start[1]


class HandLoop:
    """The recipe's epochs written by hand with hookbus's builders, a step at a time."""

    def __init__(self, cfg: Config) -> None:
        configure_process(cfg)
        self.cfg = cfg
        self.loader = build_data_loaders(cfg)["train"]
        torch.manual_seed(cfg.trainer.seed)
        self.model = build_model(cfg)
        self.loss_fn = build_loss(cfg)
        self.optimizer = build_optimizer(cfg, self.model)
        self.model.train()
        self.iteration = 0
        self.epoch = -1
        self.batches: Iterator[dict] | None = None
        self.losses: list[torch.Tensor] = []

    def step(self) -> Clock:
        """Train one step (starting the next epoch when needed); its (wall, CPU) time."""
        start = now()
        if self.batches is None:
            self.epoch += 1
            set_loader_epoch(self.loader, self.epoch)
            self.batches = iter(self.loader)
        batch = next(self.batches)
        loss = self.loss_fn(self.model(batch), batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        lr = learning_rate(self.cfg.optimizer, self.iteration, len(self.loader))
        set_learning_rate(self.optimizer, lr)
        self.optimizer.step()
        self.losses.append(loss.detach())
        self.iteration += 1
        if self.iteration % len(self.loader) == 0:
            self.batches = None
        return elapsed(start, now())


class Lockstep(Hook):
    """Runs one hand-loop step after each hookbus step, timing both."""

    priority = 10_000  # after every other handler of an event

    def __init__(self, hand: HandLoop) -> None:
        super().__init__()
        self.hand = hand
        self.bus_steps: list[Clock] = []
        self.hand_steps: list[Clock] = []
        self.bus_losses: list[torch.Tensor] = []
        self._mark: Clock = now()

    def on_phase_start(self, engine: Engine) -> None:
        self._mark = now()

    def on_step(self, engine: Engine) -> None:
        self.bus_steps.append(elapsed(self._mark, now()))
        self.bus_losses.append(engine.state.loss)
        self.hand_steps.append(self.hand.step())
        self._mark = now()


def lockstep_run(epochs: int, threads: int) -> Lockstep:
    """Both contenders through ``epochs`` epochs of the recipe, in lockstep."""
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = recipe(epochs, threads, Path(run_dir))
        lockstep = Lockstep(HandLoop(cfg))
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), lockstep]).train()
    return lockstep


def epoch_sums(steps: list[Clock], per_epoch: int) -> list[Clock]:
    """Sum the steps of each epoch but the first (the warm-up)."""
    return [
        (sum(w for w, _ in steps[i : i + per_epoch]), sum(c for _, c in steps[i : i + per_epoch]))
        for i in range(per_epoch, len(steps), per_epoch)
    ]


def main() -> None:
    quiet_training_log()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5, help="epochs per run, >= 2")
    parser.add_argument("--runs", type=int, default=3, help="runs of both contenders")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--quick", action="store_true", help="1 run of 2 epochs")
    args = parser.parse_args()
    if args.quick:
        args.epochs, args.runs = 2, 1
    runs = [lockstep_run(args.epochs, args.threads) for _ in range(args.runs)]
    per_epoch = len(runs[0].bus_steps) // args.epochs
    bus = [epoch for run in runs for epoch in epoch_sums(run.bus_steps, per_epoch)]
    hand = [epoch for run in runs for epoch in epoch_sums(run.hand_steps, per_epoch)]
    step_pairs = [
        pair
        for run in runs
        for pair in zip(run.bus_steps[per_epoch:], run.hand_steps[per_epoch:], strict=True)
    ]
    same = all(
        torch.equal(torch.stack(run.bus_losses), torch.stack(run.hand.losses)) for run in runs
    )
    print(
        f"bench_recipe: {args.runs} runs x {args.epochs} epochs of {per_epoch} steps "
        f"(the first of each run untimed); {machine()}"
    )
    rows = [
        [
            name,
            f"{median([w for w, _ in epochs]):.3f}",
            f"{median([c for _, c in epochs]):.3f}",
            f"{1e3 * median([pair[i][0] for pair in step_pairs]):.1f}",
        ]
        for i, (name, epochs) in enumerate((("hookbus", bus), ("hand loop", hand)))
    ]
    print(markdown_table(["contender", "epoch wall s", "epoch CPU s", "step wall ms"], rows))
    epoch_pairs = list(zip(bus, hand, strict=True))
    ratio_rows = [
        [
            f"{what} (median of {len(pairs)} pairs)",
            f"{median([b[0] / h[0] for b, h in pairs]):.4f}",
            f"{median([b[1] / h[1] for b, h in pairs]):.4f}",
            target,
        ]
        for what, pairs, target in (
            ("epoch time", epoch_pairs, "<= 1.03"),
            ("step time", step_pairs, ""),
        )
    ]
    print()
    print(markdown_table(["hookbus / hand loop", "wall", "CPU", "target"], ratio_rows))
    print(f"\nsame losses step by step: {same}")


if __name__ == "__main__":
    main()

"""model.compile against eager on the CPU: step time of the digits CNN and ResNet-18 at 64 px.

    .venv/bin/python benchmarks/bench_compile.py               # 3 rounds, inductor
    .venv/bin/python benchmarks/bench_compile.py --threads 1   # steadier on a busy machine
    .venv/bin/python benchmarks/bench_compile.py --quick       # a smoke run: eager backend

Both contenders run ``SSLTrainer.train`` on ``configs/simclr_digits.yaml`` with its
default hooks (no test phase, no evaluation report), once with ``model.compile.enabled``
and once without, in alternation (``benchmarks/harness.py``), ``--rounds`` times each:

* digits CNN: the recipe as it is (SmallCNN of width 32, 2 views of 16x16, batch 256),
  4 epochs of 5 steps;
* ResNet-18, 64 px: the recipe with ``model.backbone.name=resnet18``, the digits upsampled
  to 64x64, the head 512-512-64 and batch 64, 1 epoch of 20 steps.

A step's time is the trainer's own (``state.batch_time``: batch, forward, loss, backward,
update). The step time is the median over the steps after the first ``--warmup``. The
compile time is the warm-up's excess in the compiled run (its first ``--warmup`` steps'
time over as many of its later steps) less that excess in the eager run of the same
round: torch compiles the forward and the backward in the first step. Each compiled run
starts from ``torch._dynamo.reset()``, and inductor's cache lives in a fresh folder, so
the first round compiles from nothing and the later ones find inductor's cache on disk,
as a second run of a recipe on the same machine would. The losses of the two contenders
are compared step by step: compiled kernels round differently, so they are close, not
equal.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from ignite.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import interleaved, machine, markdown_table, median, quiet_training_log
from hookbus import Config, Hook, SSLTrainer, default_hooks, load_config

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "simclr_digits.yaml"

WORKLOADS: dict[str, tuple[str, ...]] = {
    "digits CNN": ("optimizer.num_epochs=4",),
    "ResNet-18, 64 px": (
        "optimizer.num_epochs=1",
        "model.backbone.name=resnet18",
        "data.image_size=64",
        "model.head.dims=[512,512,64]",
        "data.batch_size=64",
    ),
}
"""Overrides of the digits recipe for each workload (20 train steps each)."""

CONTENDERS = ("eager", "compiled")


def recipe(workload: Sequence[str], run_dir: Path, threads: int = 0) -> Config:
    """The digits recipe with ``workload``'s overrides, train phases only, on
    ``threads`` torch threads (0: torch's choice, as in the recipe)."""
    return load_config(
        RECIPE,
        [
            *workload,
            f"machine.num_threads={threads}",
            "trainer.test_model=false",
            "hooks.evaluation_report.enabled=false",
            "hooks.progress_bar.enabled=false",
            f"checkpoint.dir={run_dir}",
            "checkpoint.auto_resume=false",
        ],
    )


def with_compile(cfg: Config, compiled: bool, backend: str) -> Config:
    """``cfg`` with ``model.compile`` on (``backend``) or off."""
    settings = cfg.model.compile.model_copy(update={"enabled": compiled, "backend": backend})
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"compile": settings})})


class StepRecord(Hook):
    """Keeps each train step's time (``state.batch_time``) and loss, at ``on_step``."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []
        self.losses: list[float] = []

    def on_step(self, engine: Engine) -> None:
        state = engine.state
        if state.train:
            self.times.append(state.batch_time[-1])
            self.losses.append(float(state.loss))


@dataclass
class Run:
    """One training run's step times and losses."""

    times: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    def step_seconds(self, warmup: int) -> float:
        """The median time of the steps after the first ``warmup``."""
        return median(self.times[warmup:])

    def warmup_excess(self, warmup: int) -> float:
        """How much longer the first ``warmup`` steps took than as many later steps."""
        return sum(self.times[:warmup]) - warmup * self.step_seconds(warmup)


def train(cfg: Config) -> Run:
    """Train ``cfg`` in a fresh run directory; returns its step times and losses."""
    if cfg.model.compile.enabled:
        torch._dynamo.reset()  # compile again, as a new process would
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = cfg.model_copy(
            update={"checkpoint": cfg.checkpoint.model_copy(update={"dir": Path(run_dir)})}
        )
        record = StepRecord()
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), record]).train()
    return Run(record.times, record.losses)


def contenders(cfg: Config, backend: str) -> dict[str, Callable[[], Run]]:
    """The eager and the compiled run of ``cfg``."""
    configs = {name: with_compile(cfg, name == "compiled", backend) for name in CONTENDERS}
    return {name: (lambda c=c: train(c)) for name, c in configs.items()}


def rows(name: str, runs: dict[str, list[Run]], warmup: int) -> list[list[str]]:
    """The table row of one workload: the median step times, their ratio, the compile
    time of the first round (cold cache) and the median of the others (warm cache), and
    the largest relative difference between the two contenders' losses at a step."""
    eager, compiled = runs["eager"], runs["compiled"]
    step = {key: median([r.step_seconds(warmup) for r in value]) for key, value in runs.items()}
    pairs = list(zip(compiled, eager, strict=True))
    extra = [c.warmup_excess(warmup) - e.warmup_excess(warmup) for c, e in pairs]
    warm = f"{median(extra[1:]):.1f}" if len(extra) > 1 else "-"
    losses = [
        abs(c - e) / abs(e)
        for run_c, run_e in pairs
        for c, e in zip(run_c.losses, run_e.losses, strict=True)
    ]
    return [
        [
            name,
            f"{len(eager[0].times)} ({warmup})",
            f"{1000 * step['eager']:.0f}",
            f"{1000 * step['compiled']:.0f}",
            f"{step['eager'] / step['compiled']:.3f}",
            f"{extra[0]:.1f}",
            warm,
            f"{max(losses):.1e}",
        ]
    ]


HEADER = [
    "workload",
    "steps (untimed)",
    "eager step ms",
    "compiled step ms",
    "speed-up (eager / compiled)",
    "compile s, cold cache",
    "compile s, warm cache",
    "max loss rel. diff",
]


def main(argv: list[str] | None = None) -> None:
    quiet_training_log()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternated runs per contender")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps of a run")
    parser.add_argument("--backend", default="inductor", help="model.compile.backend")
    parser.add_argument("--threads", type=int, default=0, help="machine.num_threads (0: torch's)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append")
    parser.add_argument(
        "--quick", action="store_true", help="eager backend, 1 round of 2 digits epochs"
    )
    args = parser.parse_args(argv)
    workloads = {name: WORKLOADS[name] for name in args.workload or WORKLOADS}
    if args.quick:
        args.rounds, args.warmup, args.backend = 1, 2, "eager"
        workloads = {"digits CNN": ("optimizer.num_epochs=2",)}
    table = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # the first round compiles cold
        for name, overrides in workloads.items():
            cfg = recipe(overrides, Path(cache) / "unused", args.threads)
            runs = interleaved(contenders(cfg, args.backend), args.rounds)
            table += rows(name, runs, args.warmup)
    print(
        f"bench_compile: backend {args.backend}, {args.rounds} rounds, machine.num_threads "
        f"{args.threads}; {machine()}"
    )
    print(markdown_table(HEADER, table))


if __name__ == "__main__":
    main()

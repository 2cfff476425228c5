"""1 process vs 2, with hookbus's launcher and with torchrun, on the digits CNN and ResNet-18.

    .venv/bin/python benchmarks/bench_distributed.py               # 2 rounds, both workloads
    .venv/bin/python benchmarks/bench_distributed.py --quick       # 1 round, 2 digits epochs
    .venv/bin/python benchmarks/bench_distributed.py --launchers --rounds 3 --epochs 3 --busy 4

Runs `hookbus train configs/simclr_digits.yaml` four ways, in alternation
(`benchmarks/harness.py`), each with the same global batch, no test phase and the
distributed backend gloo:

- 1 process, torch's own thread count (`machine.num_threads` 0: 2 threads on 2 cores);
- 1 process on 1 thread (`machine.num_threads=1`);
- 2 processes started by hookbus itself (`distributed.nproc_per_node=2`), half the batch
  each;
- 2 processes started by `torchrun --standalone --nproc_per_node=2 -m hookbus` (run as
  `python -m torch.distributed.run`, torchrun's module).

Both launchers give each rank cores / processes threads (here 1). Two workloads:

- digits CNN: the recipe (SmallCNN of width 32, 2 views of 16x16), global batch 256,
  5 epochs of 5 steps;
- ResNet-18, 32 px: the recipe with `model.backbone.name=resnet18`, the digits upsampled
  to 32x32, the head 512-512-64, global batch 128, 3 epochs of 10 steps.

Throughput is images per second over the train phases after the first (read from the
run's `log.txt`: from the end of phase 0 to the end of the last phase, so process start,
data set-up and the first epoch's warm-up are left out); the wall time, start to exit,
is shown too. The efficiency of 2 processes is their throughput over twice the
throughput of one process: 1.0 would be perfect scaling over two workers, each as fast
as the one alone.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import interleaved, machine, markdown_table, median

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
"""``torchrun``, as its module (the same entry point, found in any environment)."""

ONE, ONE_THREAD, LAUNCHER, TORCHRUN_2 = (
    "1 process",
    "1 process, 1 thread",
    "2, hookbus launcher",
    "2, torchrun",
)
CONTENDERS = (ONE, ONE_THREAD, LAUNCHER, TORCHRUN_2)


@dataclass(frozen=True)
class Workload:
    """A version of the digits recipe: overrides, global batch and train epochs."""

    overrides: tuple[str, ...]
    global_batch: int
    epochs: int


WORKLOADS = {
    "digits CNN": Workload((), global_batch=256, epochs=5),
    "ResNet-18, 32 px": Workload(
        (
            "model.backbone.name=resnet18",
            "data.image_size=32",
            "model.head.dims=[512,512,64]",
        ),
        global_batch=128,
        epochs=3,
    ),
}

PHASE_DONE = re.compile(r"^(\S+ \S+) INFO phase (\d+)(?:/\d+)? train done \| (\d+) steps", re.M)
"""A train phase's last line in ``log.txt``: its time, phase number and steps (``phase 3/44
train done``; a log from before phases were counted from 1 has ``phase 2 train done``)."""


def command(contender: str, workload: Workload, run_dir: Path) -> list[str]:
    """The command line of one contender's run."""
    processes = 2 if contender in (LAUNCHER, TORCHRUN_2) else 1
    overrides = [
        *workload.overrides,
        f"checkpoint.dir={run_dir}",
        f"optimizer.num_epochs={workload.epochs}",
        f"data.batch_size={workload.global_batch // processes}",
        "distributed.backend=gloo",
        "trainer.test_model=false",
        "hooks.evaluation_report.enabled=false",
        "hooks.progress_bar.enabled=false",
    ]
    if contender == ONE_THREAD:
        overrides.append("machine.num_threads=1")
    if contender == LAUNCHER:
        overrides.append("distributed.nproc_per_node=2")
    if contender == TORCHRUN_2:
        launcher = [*TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "hookbus"]
    else:
        launcher = [sys.executable, "-m", "hookbus"]
    return [*launcher, "train", str(RECIPE), *overrides, "-q"]


def steady_rate(log: str, global_batch: int) -> float:
    """Images per second over the train phases after the first, from a run's log text."""
    phases = [
        (datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f"), int(steps))
        for stamp, _, steps in PHASE_DONE.findall(log)
    ]
    if len(phases) < 2:
        raise ValueError(f"the log has {len(phases)} train phase ends; 2 or more are needed")
    seconds = (phases[-1][0] - phases[0][0]).total_seconds()
    return sum(steps for _, steps in phases[1:]) * global_batch / seconds


@dataclass(frozen=True)
class Measurement:
    wall: float
    """Seconds from start to exit."""
    rate: float
    """Images per second after the first epoch."""
    cpu: float = 0.0
    """CPU seconds (user and system) of every process the run started."""


def children_cpu() -> float:
    """CPU seconds used so far by this process's finished (waited-for) descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(contender: str, workload: Workload, workdir: Path) -> Measurement:
    """Train once as ``contender``; returns the wall time, steady throughput and CPU."""
    run_dir = workdir / f"run_{time.monotonic_ns()}"
    cpu = children_cpu()
    started = time.monotonic()
    subprocess.run(command(contender, workload, run_dir), cwd=ROOT, check=True, capture_output=True)
    wall = time.monotonic() - started
    cpu = children_cpu() - cpu
    rate = steady_rate((run_dir / "log.txt").read_text(), workload.global_batch)
    shutil.rmtree(run_dir, ignore_errors=True)
    return Measurement(wall, rate, cpu)


SPIN = "while True: pass"
"""What each process of the second job does: keep a core busy."""


def busy_run(contender: str, workload: Workload, workdir: Path, spinners: int) -> Measurement:
    """:func:`run` with ``spinners`` processes keeping the cores busy beside it."""
    job = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(spinners)]
    try:
        return run(contender, workload, workdir)
    finally:
        for process in job:
            process.kill()
            process.wait()


LAUNCHER_HEADER = [
    "cores",
    "contender",
    "wall s",
    "CPU s",
    "wall / torchrun's",
    "CPU / torchrun's",
]


def launcher_rows(results: dict[tuple[str, str], list[Measurement]]) -> list[list[str]]:
    """Per condition and launcher: median wall and CPU seconds, and the launcher's
    medians over torchrun's."""
    table = []
    for condition in dict.fromkeys(key[0] for key in results):
        wall = {c: median([m.wall for m in results[condition, c]]) for c in (LAUNCHER, TORCHRUN_2)}
        cpu = {c: median([m.cpu for m in results[condition, c]]) for c in (LAUNCHER, TORCHRUN_2)}
        for contender in (LAUNCHER, TORCHRUN_2):
            table.append(
                [
                    condition,
                    contender,
                    f"{wall[contender]:.1f}",
                    f"{cpu[contender]:.1f}",
                    f"{wall[contender] / wall[TORCHRUN_2]:.3f}",
                    f"{cpu[contender] / cpu[TORCHRUN_2]:.3f}",
                ]
            )
    return table


def compare_launchers(rounds: int, epochs: int, spinners: int) -> None:
    """The ``--launchers`` campaign: both launchers on quiet and busy cores, alternated."""
    workload = Workload((), global_batch=256, epochs=epochs)
    busy = f"busy ({spinners} spinning)"
    with tempfile.TemporaryDirectory() as workdir:
        runs = {}
        for contender in (LAUNCHER, TORCHRUN_2):
            runs["quiet", contender] = lambda c=contender: run(c, workload, Path(workdir))
            runs[busy, contender] = lambda c=contender: busy_run(
                c, workload, Path(workdir), spinners
            )
        results = interleaved(runs, rounds)
    print(markdown_table(LAUNCHER_HEADER, launcher_rows(results)))
    for key, values in results.items():
        walls = " ".join(f"{m.wall:.1f}" for m in values)
        print(f"{key[0]}, {key[1]}: wall s per round {walls}")


def rows(name: str, results: dict[str, list[Measurement]]) -> list[list[str]]:
    """Per contender: median wall time, median images/s, and for the 2-process runs the
    efficiency against each 1-process contender."""
    rate = {key: median([m.rate for m in values]) for key, values in results.items()}
    table = []
    for contender in CONTENDERS:
        two = contender in (LAUNCHER, TORCHRUN_2)
        table.append(
            [
                name,
                contender,
                f"{median([m.wall for m in results[contender]]):.1f}",
                f"{rate[contender]:.0f}",
                f"{rate[contender] / (2 * rate[ONE]):.2f}" if two else "",
                f"{rate[contender] / (2 * rate[ONE_THREAD]):.2f}" if two else "",
            ]
        )
    return table


HEADER = [
    "workload",
    "contender",
    "wall s",
    "images/s",
    "efficiency vs 1 process",
    "efficiency vs 1 process, 1 thread",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs per contender")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append")
    parser.add_argument("--quick", action="store_true", help="1 round of 2 digits epochs")
    parser.add_argument(
        "--launchers", action="store_true", help="the two launchers on quiet and busy cores"
    )
    parser.add_argument("--epochs", type=int, default=3, help="--launchers: digits epochs (3)")
    parser.add_argument(
        "--busy", type=int, default=4, help="--launchers: spinning processes beside a busy run"
    )
    args = parser.parse_args(argv)
    if args.launchers:
        print(f"bench_distributed --launchers: {args.rounds} rounds; {machine()}")
        compare_launchers(args.rounds, args.epochs, args.busy)
        print(f"after: {machine()}")
        return
    workloads = {name: WORKLOADS[name] for name in args.workload or WORKLOADS}
    if args.quick:
        args.rounds = 1
        workloads = {"digits CNN": Workload((), global_batch=256, epochs=2)}
    print(f"bench_distributed: {args.rounds} rounds; {machine()}")
    table, ratios = [], []
    with tempfile.TemporaryDirectory() as workdir:
        for name, workload in workloads.items():
            runs = {c: lambda c=c, w=workload: run(c, w, Path(workdir)) for c in CONTENDERS}
            results = interleaved(runs, args.rounds)
            table += rows(name, results)
            walls = {key: median([m.wall for m in values]) for key, values in results.items()}
            ratios.append(
                f"{name}: hookbus launcher wall time / torchrun's "
                f"{walls[LAUNCHER] / walls[TORCHRUN_2]:.2f} (target <= 1.10)"
            )
    print(markdown_table(HEADER, table))
    print("\n".join(ratios))
    print(f"after: {machine()}")


if __name__ == "__main__":
    main()

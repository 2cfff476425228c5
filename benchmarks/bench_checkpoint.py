"""Training time lost per checkpoint of a ResNet-50-sized state, synchronous vs async.

    .venv/bin/python benchmarks/bench_checkpoint.py            # ResNet-50, 5 rounds
    .venv/bin/python benchmarks/bench_checkpoint.py --quick    # ResNet-18, 1 round

The state is what :class:`hookbus.hooks.checkpoint.CheckpointHook` saves for a torchvision
ResNet-50 (random weights) trained with Adam: the model's weights plus the optimizer's
two moments (about 3 x 98 MiB), with counters, RNG states and config. The hook saves
it to ``--dir`` (a temporary folder by default) as in training: an atomic file with its
checksum, the ``checkpoint.torch`` link, rotation.

Training is a stand-in workload on the same cores: steps of the digits recipe's model
(forward, backward, AdamW step on random images), enough of them to outlast a
synchronous save. Three contenders run in alternation, ``--rounds`` times:

* no checkpoint: the workload alone;
* sync: ``save()`` at the workload's start, writing the file before it returns;
* async: the same with ``async_write``: ``save()`` returns once the state is copied to
  host memory; the file is written by a background thread while the workload runs.

Each hook saves once, untimed, before the rounds: the first save of a run allocates
what later ones reuse (the async snapshot's host buffers); its stall is printed too.

Shown per mode, as medians: how long ``save()`` blocks the step (the stall), and the
training time lost: the workload's time with the checkpoint minus its time alone in the
same round (for async this adds the writer's competition for the cores and any wait for
the write still running when the workload ends). On a busy machine the lost time is
much noisier than the stall: the workload's own time varies by about as much.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import interleaved, machine, markdown_table, median, paired_median
from hookbus import Config, FakeEngine
from hookbus.engine.bus.phases import Phase
from hookbus.hooks.checkpoint import CheckpointHook
from hookbus.parts.models import build_model


def resnet_state(name: str) -> FakeEngine:
    """A run state holding a torchvision ``name`` and Adam moments for all its weights."""
    model = getattr(torchvision.models, name)()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for param in model.parameters():
        param.grad = torch.zeros_like(param)
    optimizer.step()  # creates both moments of every parameter
    optimizer.zero_grad(set_to_none=True)
    return FakeEngine(
        cfg=Config(),
        phases=[Phase("train", True, 1000)],
        phase_idx=0,
        train_phase_idx=0,
        batches=1,
        iteration=1,
        phase_length=1000,
        base_model=model,
        model=model,
        loss_fn=torch.nn.Identity(),
        optimizer=optimizer,
    )


def state_megabytes(engine: FakeEngine) -> float:
    """MiB of tensors in the model's and the optimizer's state."""
    tensors = list(engine.state.base_model.state_dict().values())
    for moments in engine.state.optimizer.state.values():
        tensors += [value for value in moments.values() if isinstance(value, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


class Workload:
    """Training steps of the digits recipe's model on random images, on the same cores."""

    def __init__(self) -> None:
        cfg = Config()
        self.model = build_model(cfg)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        views = [torch.randn(256, 1, 16, 16) for _ in range(2)]
        self.batch = {"views": views}

    def step(self) -> None:
        output = self.model(self.batch)
        loss = sum(embedding.square().mean() for embedding in output["embeddings"])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def seconds_per_step(self, steps: int = 3) -> float:
        started = time.perf_counter()
        for _ in range(steps):
            self.step()
        return (time.perf_counter() - started) / steps


def contender(
    engine: FakeEngine, workload: Workload, steps: int, hook: CheckpointHook | None
) -> Callable[[], tuple[float, float]]:
    """One measurement: (seconds ``save()`` blocks, seconds of the workload with it)."""

    def run() -> tuple[float, float]:
        started = time.perf_counter()
        stall = 0.0
        if hook is not None:
            hook.save(engine, phase_done=False)
            stall = time.perf_counter() - started
        for _ in range(steps):
            workload.step()
        if hook is not None:
            hook.wait()
        return stall, time.perf_counter() - started

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="torchvision model of the state")
    parser.add_argument("--rounds", type=int, default=5, help="alternated measurements")
    parser.add_argument("--dir", type=Path, default=None, help="where checkpoints go")
    parser.add_argument("--quick", action="store_true", help="resnet18, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.model, args.rounds = "resnet18", 1
    engine = resnet_state(args.model)
    workload = Workload()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        directory = Path(folder)
        sync = CheckpointHook(directory / "sync", phase_frequency=0, keep_last=1)
        asynchronous = CheckpointHook(
            directory / "async", phase_frequency=0, keep_last=1, async_write=True
        )
        save_started = time.perf_counter()
        sync.save(engine, phase_done=False)  # warms up; sizes the workload
        save_seconds = time.perf_counter() - save_started
        first_started = time.perf_counter()
        asynchronous.save(engine, phase_done=False)
        first_stall = time.perf_counter() - first_started
        asynchronous.wait()
        step_seconds = workload.seconds_per_step()
        steps = math.ceil((1.5 * save_seconds + 1.0) / step_seconds)
        times = interleaved(
            {
                "no checkpoint": contender(engine, workload, steps, None),
                "sync": contender(engine, workload, steps, sync),
                "async": contender(engine, workload, steps, asynchronous),
            },
            args.rounds,
        )
    alone = [total for _, total in times["no checkpoint"]]
    print(
        f"bench_checkpoint: {args.model} + Adam state, {state_megabytes(engine):.0f} MiB; "
        f"workload {steps} steps of {step_seconds:.3f} s; {args.rounds} rounds; {machine()}"
    )
    print(f"first async save of the run (allocates its host buffers): {first_stall:.3f} s stall")
    rows = []
    summary = {}
    for mode in ("sync", "async"):
        stall = median([stall for stall, _ in times[mode]])
        lost = paired_median([total for _, total in times[mode]], alone)
        summary[mode] = (stall, lost)
        rows.append([mode, f"{stall:.3f}", f"{lost:.3f}"])
    print(markdown_table(["mode", "save() blocks s", "training time lost s"], rows))
    sync_stall = summary["sync"][0]
    print()
    print(
        markdown_table(
            ["async / sync save time", "value", "target"],
            [
                ["stall", f"{summary['async'][0] / sync_stall:.3f}", "<= 0.20"],
                ["training time lost", f"{summary['async'][1] / sync_stall:.3f}", ""],
            ],
        )
    )


if __name__ == "__main__":
    main()

"""The benchmark scripts' machinery, cheaply: no timing is asserted, only that it runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks import bench_bus, bench_gpu
from benchmarks.harness import interleaved, markdown_table, paired_median


def test_interleaved_rotates_the_order_of_the_contenders() -> None:
    calls: list[str] = []

    def contender(name: str) -> object:
        return lambda: calls.append(name) or len(calls)

    results = interleaved({name: contender(name) for name in "abc"}, rounds=3)
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert results["a"] == [1, 6, 8]


def test_paired_median_and_table() -> None:
    assert paired_median([5.0, 7.0, 9.0], [1.0, 1.0, 8.0]) == 4.0
    assert markdown_table(["a", "b"], [["1", "2"]]) == "| a | b |\n|---|---|\n| 1 | 2 |"


@pytest.mark.parametrize(
    "run",
    [
        bench_bus.run_hand_loop,
        bench_bus.run_ignite,
        lambda task: bench_bus.run_hookbus(task, with_defaults=True),
    ],
)
def test_bus_contenders_train_every_batch(run: object) -> None:
    task = bench_bus.Task(bench_bus.make_loader(6))
    run(task)  # type: ignore[operator]
    assert len(task.model.stamps) == 6
    wall, cpu = task.seconds_per_iteration(warmup=1)
    assert wall > 0 and cpu >= 0


def _tiny_gpu_config(tmp_path: Path) -> object:
    return bench_gpu.bench_config(
        steps=3,
        batch_size=4,
        image_size=8,
        backbone="small_cnn",
        head=(128, 16, 8),
        channels=1,
        amp=False,
        device="cpu",
        run_dir=tmp_path,
    )


def test_gpu_benchmark_contenders_run_on_the_cpu(tmp_path: Path) -> None:
    cfg = _tiny_gpu_config(tmp_path)
    assert bench_gpu.hand_loop(cfg, warmup=1, channels_last=True) > 0  # type: ignore[arg-type]
    assert bench_gpu.hookbus(cfg, warmup=1, channels_last=True) > 0  # type: ignore[arg-type]


def test_gpu_benchmark_says_so_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="no CUDA device"):
        bench_gpu.main([])

"""The benchmark scripts' machinery, cheaply: no timing is asserted, only that it runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from benchmarks import bench_bus, bench_compile, bench_data, bench_distributed, bench_gpu
from benchmarks.harness import interleaved, markdown_table, paired_median
from benchmarks.peer_pipelines import lightly_transform, torchvision_v1_transform
from benchmarks.photo_folder import photo, write_photo_folder
from hookbus import SSLTrainer
from tests.conftest import tiny_config


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


def test_generated_photos_compress_like_photos(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    photo(0).save(path, quality=90)
    assert photo(0).size == (500, 375)
    assert path.stat().st_size > 40_000  # a flat 500x375 image takes a few KB
    assert photo(1).tobytes() != photo(0).tobytes()


def test_photo_contenders_make_batches_of_the_recipes_views(tmp_path: Path) -> None:
    folder = write_photo_folder(tmp_path, 4, size=(60, 45))
    contenders = bench_data.photo_contenders(bench_data.PHOTO_RECIPE, folder, 2, workers=0)
    expected = {"hookbus crop_first", "hookbus torchvision", "torchvision v1 PIL"}
    cfg = bench_data.load_config(bench_data.PHOTO_RECIPE)
    if lightly_transform(cfg) is not None:
        expected.add("lightly SimCLRTransform")
    assert set(contenders) == expected
    assert all(run() > 0 for run in contenders.values())
    views = torchvision_v1_transform(cfg)(photo(0, (60, 45)))
    assert [tuple(view.shape) for view in views] == [(3, 224, 224)] * 2


def test_compile_benchmark_times_both_contenders_on_the_eager_backend(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "unused",
        trainer={"test_model": False},
        optimizer={"num_epochs": 1, "warmup_epochs": 0},
        machine={"num_threads": 1},
        hooks={"summary_plot": {"enabled": False}, "tensorboard": {"enabled": False}},
    )
    runs = interleaved(bench_compile.contenders(cfg, "eager"), rounds=2)
    assert [len(run.times) for run in runs["eager"] + runs["compiled"]] == [3, 3, 3, 3]
    assert runs["compiled"][0].losses == pytest.approx(runs["eager"][0].losses, rel=1e-5)
    (row,) = bench_compile.rows("tiny", runs, warmup=1)
    assert len(row) == len(bench_compile.HEADER) and row[:2] == ["tiny", "3 (1)"]


def test_distributed_benchmark_commands_split_the_global_batch(tmp_path: Path) -> None:
    workload = bench_distributed.WORKLOADS["ResNet-18, 32 px"]
    commands = {
        contender: bench_distributed.command(contender, workload, tmp_path)
        for contender in bench_distributed.CONTENDERS
    }
    assert "data.batch_size=128" in commands["1 process"]
    assert "machine.num_threads=1" in commands["1 process, 1 thread"]
    assert "data.batch_size=64" in commands["2, hookbus launcher"]
    assert "distributed.nproc_per_node=2" in commands["2, hookbus launcher"]
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m"]
    assert commands["2, torchrun"][1:7] == [*torchrun, "hookbus"]
    assert all("model.backbone.name=resnet18" in line for line in commands.values())


def test_distributed_benchmark_reads_the_rate_after_the_first_phase() -> None:
    log = "\n".join(
        [
            "2026-12-01 08:00:00,000 INFO phase 0 train done | 5 steps | data wait 1.0%",
            "2026-12-01 08:00:04,000 INFO phase 1 test done | 1 steps | data wait 1.0%",
            "2026-12-01 08:00:10,000 INFO phase 2 train done | 5 steps | data wait 1.0%",
            "2026-12-01 08:00:20,500 INFO phase 4 train done | 5 steps | data wait 1.0%",
        ]
    )
    assert bench_distributed.steady_rate(log, global_batch=256) == pytest.approx(2560 / 20.5)
    with pytest.raises(ValueError, match="1 train phase ends"):
        bench_distributed.steady_rate(log.splitlines()[0], global_batch=256)


def test_distributed_benchmark_reads_a_real_log(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "run", machine={"num_threads": 1})
    SSLTrainer(cfg).train()
    rate = bench_distributed.steady_rate((tmp_path / "run" / "log.txt").read_text(), 8)
    assert 0 < rate < float("inf")


def test_distributed_benchmark_efficiency_is_over_twice_one_process() -> None:
    rates = {"1 process": 100, "1 process, 1 thread": 60, "2, hookbus launcher": 120}
    rates["2, torchrun"] = 90
    results = {name: [bench_distributed.Measurement(10.0, rate)] for name, rate in rates.items()}
    table = bench_distributed.rows("w", results)
    assert [row[4:] for row in table] == [["", ""], ["", ""], ["0.60", "1.00"], ["0.45", "0.75"]]
    assert len(table[0]) == len(bench_distributed.HEADER)


def test_launcher_comparison_gives_wall_and_cpu_over_torchruns_per_condition() -> None:
    launcher, torchrun = bench_distributed.LAUNCHER, bench_distributed.TORCHRUN_2
    measure = bench_distributed.Measurement
    results = {
        ("quiet", launcher): [measure(20.0, 0, 30.0), measure(22.0, 0, 31.0)],
        ("quiet", torchrun): [measure(25.0, 0, 40.0), measure(26.0, 0, 41.0)],
        ("busy", launcher): [measure(50.0, 0, 30.0)],
        ("busy", torchrun): [measure(40.0, 0, 30.0)],
    }
    table = bench_distributed.launcher_rows(results)
    assert [row[:2] + row[4:] for row in table] == [
        ["quiet", launcher, "0.824", "0.753"],
        ["quiet", torchrun, "1.000", "1.000"],
        ["busy", launcher, "1.250", "1.000"],
        ["busy", torchrun, "1.000", "1.000"],
    ]
    assert len(table[0]) == len(bench_distributed.LAUNCHER_HEADER)


def test_a_busy_run_stops_its_spinning_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def spy(*args: object, **kwargs: object) -> subprocess.Popen:
        process = real(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(bench_distributed.subprocess, "Popen", spy)
    monkeypatch.setattr(bench_distributed, "run", lambda *args: bench_distributed.Measurement(1, 1))
    workload = bench_distributed.Workload((), global_batch=8, epochs=1)
    assert bench_distributed.busy_run("x", workload, tmp_path, 2).wall == 1
    assert len(started) == 2
    assert all(process.poll() is not None for process in started)


@pytest.mark.slow
def test_fsdp_memory_benchmark_sets_state_and_peak_memory_of_ddp_and_fsdp_side_by_side(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import bench_fsdp_memory

    monkeypatch.setattr(bench_fsdp_memory, "MODELS", {"digits BYOL": ("byol_digits", True)})
    bench_fsdp_memory.rss_table()
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[1] for row in rows] == ["ddp", "fsdp"]
    ddp_state, fsdp_state = (float(row[2]) for row in rows)
    assert fsdp_state / ddp_state == pytest.approx(0.5, abs=0.02)
    assert 0 < float(rows[1][5].rstrip(" |")) < 1.5  # peak resident, FSDP over DDP

"""The hostile-input campaign: inputs outside the config table of bad_inputs.py, each
through a `hookbus` subprocess, by class.

    .venv/bin/python benchmarks/hostile_inputs.py [--only CLASS ...] [--timeout S]

Classes: code execution (a file in the working directory named like a library),
loader workers (a corrupt image with workers), checkpoint contents (a newest checkpoint
with a valid checksum but contents that do not fit), unbounded reads (a device, a FIFO
or a huge sparse file as the recipe), write failures (a full disk, /dev/full as
standard output), environment (malformed distributed variables, a rendezvous that never
completes) and run directory (the wrong kind of entry by a name hookbus writes).

A case is handled cleanly when the process ends within the timeout without a traceback
and with the outcome the docs promise: for a refusal, exit status 2 (a user error) or 1
(a write or rendezvous failure) and one line on stderr; for code execution, the planted
file never ran. "wrote" counts cases that changed a run directory which they were
refused for (a refusal must leave it as it was); for an input met only once training
started (a corrupt image), whose run has begun writing, it is shown but not held
against the case. Prints a table per class and the cases
that were not clean; exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import hostile_shards
from benchmarks.harness import machine, markdown_table
from hookbus.launcher import free_port

ROOT = Path(__file__).resolve().parents[1]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
DIGITS = str(ROOT / "configs" / "simclr_digits.yaml")
FAST = [
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=100",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.summary_plot.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
]
CLASSES = (
    "code execution",
    "loader workers",
    "checkpoint contents",
    "unbounded reads",
    "write failures",
    "environment",
    "run directory",
    *hostile_shards.KINDS,
)


@dataclass
class Case:
    """One hostile input: ``prepare(workdir)`` plants it and returns the arguments of
    ``hookbus``; the run directory is ``workdir/run``."""

    kind: str
    name: str
    prepare: Callable[[Path], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    runs_code: str | None = None
    """For code execution: the file that appears if the planted code ran."""
    stdout: str | None = None
    """Where standard output goes (a path such as /dev/full), or None for a pipe."""
    starts_run: bool = False
    """The input is met only once training has started (an image read in the first
    epoch): the run directory holds that run's files, so "wrote" does not count."""


def digits_train(workdir: Path, *extra: str) -> list[str]:
    return ["train", DIGITS, f"checkpoint.dir={workdir / 'run'}", *FAST, *extra, "-q"]


def planted_module(module: str) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        (workdir / f"{module}.py").write_text(f'open("PWNED_{module}", "w").close()\n')
        return ["validate", DIGITS, f"checkpoint.dir={workdir / 'run'}", "-q"]

    return prepare


def corrupt_image_folder(workdir: Path) -> list[str]:
    from PIL import Image

    for split in ("train", "test"):
        for label in ("a", "b"):
            folder = workdir / "images" / split / label
            folder.mkdir(parents=True)
            for index in range(4):
                Image.new("RGB", (40, 40), (index * 40, 80, 120)).save(folder / f"{index}.jpg")
    (workdir / "images" / "train" / "a" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    return [
        "train",
        str(ROOT / "configs" / "simclr_imagefolder_resnet50.yaml"),
        f"checkpoint.dir={workdir / 'run'}",
        f"data.folder.train_dir={workdir / 'images' / 'train'}",
        f"data.folder.test_dir={workdir / 'images' / 'test'}",
        "data.num_workers=2",
        "data.batch_size=4",
        "data.test_batch_size=4",
        "data.image_size=32",
        "model.backbone.name=small_cnn",
        "model.backbone.width=8",
        "optimizer.num_epochs=1",
        "hooks.evaluation_report.enabled=false",
        "hooks.summary_plot.enabled=false",
        "-q",
    ]


_TRAINED: dict[str, Path] = {}


def trained_run(cache: Path) -> Path:
    """A finished one-epoch digits run (trained once per campaign)."""
    if "run" not in _TRAINED:
        run_dir = cache / "trained"
        done = subprocess.run(
            [HOOKBUS, "train", DIGITS, f"checkpoint.dir={run_dir}", *FAST, "-q"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the reference run failed: {done.stderr[-500:]}")
        _TRAINED["run"] = run_dir
    return _TRAINED["run"]


def crafted_checkpoint(change: Callable[[dict], None], command: str) -> Callable[[Path], list]:
    """A copy of the reference run whose newest checkpoint is changed by ``change`` and
    given a matching checksum file; resumed with ``train`` or read by ``export``."""

    def prepare(workdir: Path) -> list[str]:
        import torch

        run_dir = workdir / "run"
        shutil.copytree(trained_run(workdir.parent), run_dir, symlinks=True)
        newest = (run_dir / "checkpoint.torch").resolve()
        checkpoint = torch.load(newest, weights_only=True)
        change(checkpoint)
        torch.save(checkpoint, newest)
        data = newest.read_bytes()
        newest.with_name(newest.name + ".sha256").write_text(
            f"{hashlib.sha256(data).hexdigest()} {len(data)}\n"
        )
        if command == "export":
            return ["export", str(newest), str(workdir / "backbone.pth")]
        return digits_train(workdir, "optimizer.num_epochs=2")

    return prepare


def set_key(path: str, value: object) -> Callable[[dict], None]:
    def change(checkpoint: dict) -> None:
        *parents, last = path.split(".")
        target = checkpoint
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def recipe_at(make: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        recipe = workdir / "recipe.yaml"
        make(recipe)
        return ["validate", str(recipe), f"checkpoint.dir={workdir / 'run'}", "-q"]

    return prepare


def sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(4 << 30)


def device(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def full_tmpfs_run(workdir: Path) -> list[str]:
    mount = workdir / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        raise Skipped(f"cannot mount a tmpfs ({done.stderr.decode().strip()[:60]})")
    filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(filler, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(filler)
    return ["train", DIGITS, f"checkpoint.dir={mount / 'run'}", *FAST, "-q"]


class Skipped(Exception):
    """A case this machine cannot set up (no tmpfs mount, say)."""


def run_dir_entry(name: str, kind: str) -> Callable[[Path], list[str]]:
    def prepare(workdir: Path) -> list[str]:
        run_dir = workdir / "run"
        run_dir.mkdir()
        if kind == "folder":
            (run_dir / name).mkdir()
        elif kind == "fifo":
            os.mkfifo(run_dir / name)
        else:
            (run_dir / name).write_text("")
        return digits_train(workdir)

    return prepare


def rendezvous(workdir: Path) -> list[str]:
    return digits_train(workdir, "distributed.init_timeout_seconds=3")


def env_case(
    name: str, env: dict[str, str], prepare: Callable[[Path], list[str]] = digits_train
) -> Case:
    meet = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517"}
    return Case("environment", name, prepare, env={**meet, **env})


CASES: list[Case] = [
    Case(
        "code execution",
        "sklearn.py in the working directory",
        planted_module("sklearn"),
        runs_code="PWNED_sklearn",
    ),
    Case(
        "code execution",
        "torchvision.py in the working directory",
        planted_module("torchvision"),
        runs_code="PWNED_torchvision",
    ),
    Case(
        "code execution",
        "yaml.py in the working directory",
        planted_module("yaml"),
        runs_code="PWNED_yaml",
    ),
    Case(
        "loader workers",
        "a corrupt JPEG with data.num_workers=2",
        corrupt_image_folder,
        starts_run=True,
    ),
    Case(
        "checkpoint contents",
        "model is a string (resume)",
        crafted_checkpoint(set_key("model", "weights"), "train"),
    ),
    Case(
        "checkpoint contents",
        "phase_idx 10**9 (resume)",
        crafted_checkpoint(set_key("phase_idx", 10**9), "train"),
    ),
    Case(
        "checkpoint contents",
        "hooks.timing = 5 (resume)",
        crafted_checkpoint(set_key("hooks.timing", 5), "train"),
    ),
    Case(
        "checkpoint contents",
        "model is a string (export)",
        crafted_checkpoint(set_key("model", "weights"), "export"),
    ),
    Case("unbounded reads", "/dev/zero as the recipe", recipe_at(device("/dev/zero"))),
    Case("unbounded reads", "a FIFO as the recipe", recipe_at(lambda path: os.mkfifo(path))),
    Case("unbounded reads", "a 4 GiB sparse recipe", recipe_at(sparse)),
    Case("write failures", "hookbus schema > /dev/full", lambda _: ["schema"], stdout="/dev/full"),
    Case(
        "write failures", "hookbus recipes > /dev/full", lambda _: ["recipes"], stdout="/dev/full"
    ),
    Case("write failures", "train on a full disk", full_tmpfs_run),
    env_case("WORLD_SIZE=abc", {"WORLD_SIZE": "abc"}),
    env_case("WORLD_SIZE=-1", {"WORLD_SIZE": "-1"}),
    env_case("LOCAL_RANK=x", {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "x"}),
    env_case("RANK=2 of WORLD_SIZE=2", {"WORLD_SIZE": "2", "RANK": "2"}),
    env_case("MASTER_PORT=99999", {"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "99999"}),
    env_case(
        "rank 0 of 2 alone (init timeout 3 s)",
        {"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": str(free_port())},
        rendezvous,
    ),
    Case("run directory", "metrics.json is a folder", run_dir_entry("metrics.json", "folder")),
    Case(
        "run directory",
        "a folder named like a temporary file",
        run_dir_entry(".checkpoint.torch.tmp-77", "folder"),
    ),
    Case("run directory", "log.txt is a FIFO", run_dir_entry("log.txt", "fifo")),
    Case("run directory", "config.yaml is a folder", run_dir_entry("config.yaml", "folder")),
    Case(
        "run directory", "checkpoint.torch is a folder", run_dir_entry("checkpoint.torch", "folder")
    ),
    Case("run directory", "tensorboard is a file", run_dir_entry("tensorboard", "file")),
]
CASES += [
    Case(kind, name, prepare, runs_code=payload, env=hostile_shards.CLOSED_PORT_ENV)
    for kind, name, prepare, payload in hostile_shards.CASES
]
"""The cases, from the classes of the hostile tester's report (those of shard sets,
``hookbus shard``, the shard cache and sharded checkpoints: benchmarks/hostile_shards.py)."""


@dataclass
class Outcome:
    status: int | str
    error_lines: list[str]
    seconds: float
    wrote: bool
    ran_code: bool

    def clean(self, case: Case) -> bool:
        if isinstance(self.status, str) or any("Traceback" in line for line in self.error_lines):
            return False
        if case.runs_code is not None:
            return not self.ran_code
        wrote = self.wrote and not case.starts_run
        return self.status in (1, 2) and len(self.error_lines) == 1 and not wrote

    def __str__(self) -> str:
        last = self.error_lines[-1][:160] if self.error_lines else ""
        return f"status {self.status}, {len(self.error_lines)} stderr lines, last: {last}"


def snapshot(run_dir: Path) -> set[tuple[str, int]] | None:
    if not run_dir.exists():
        return None
    return {
        (str(path.relative_to(run_dir)), path.lstat().st_size) for path in run_dir.rglob("*")
    } | {(".", run_dir.stat().st_mtime_ns)}


def run_case(case: Case, workdir: Path, timeout: float) -> Outcome:
    """Plant ``case`` in ``workdir`` and run its ``hookbus`` command there."""
    workdir.mkdir(parents=True)
    args = case.prepare(workdir)
    run_dir = workdir / "run"
    if case.kind == "write failures" and "train" in args:
        run_dir = Path(next(a for a in args if a.startswith("checkpoint.dir="))[15:])
    before = snapshot(run_dir)
    env = {**os.environ, "OMP_NUM_THREADS": "1", **case.env}
    started = time.perf_counter()
    out = open(case.stdout, "w") if case.stdout else subprocess.PIPE  # noqa: SIM115
    try:
        done = subprocess.run(
            [HOOKBUS, *args],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
        status: int | str = done.returncode
        err = done.stderr
    except subprocess.TimeoutExpired as exc:
        status, err = f"hang (> {timeout:g} s)", (exc.stderr or b"").decode(errors="replace")
    finally:
        if case.stdout:
            out.close()  # type: ignore[union-attr]
    seconds = time.perf_counter() - started
    lines = [line for line in err.splitlines() if line.strip()]
    wrote = case.kind != "write failures" and snapshot(run_dir) != before
    ran = case.runs_code is not None and (workdir / case.runs_code).exists()
    if case.kind == "write failures" and "train" in args:
        subprocess.run(["umount", "-l", str(run_dir.parent)], check=False)
    hostile_shards.unmount_all()
    return Outcome(status, lines, seconds, wrote, ran)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=CLASSES, help="run these classes only")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if not args.only or case.kind in args.only]
    rows: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])
    failures = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        for index, case in enumerate(cases):
            try:
                outcome = run_case(case, Path(root) / f"case{index}", args.timeout)
            except (Skipped, hostile_shards.Skipped) as skip:
                rows[case.kind][3] += 1
                print(f"skipped: {case.kind}: {case.name}: {skip}")
                continue
            verdict = "clean" if outcome.clean(case) else "NOT CLEAN"
            print(f"{case.kind}: {case.name}: {verdict} ({outcome.seconds:.1f} s)", flush=True)
            row = rows[case.kind]
            row[0] += 1
            row[1] += outcome.clean(case)
            row[2] += outcome.wrote
            if not outcome.clean(case):
                failures.append((case, outcome))
    print(f"hostile_inputs: {len(cases)} cases in {time.perf_counter() - started:.0f} s")
    print(machine())
    table = [
        [kind, str(n), str(clean), str(wrote), str(skipped)]
        for kind in CLASSES
        if kind in rows
        for n, clean, wrote, skipped in [rows[kind]]
    ]
    totals = [sum(row[i] for row in rows.values()) for i in range(4)]
    table.append(["all", *map(str, totals)])
    print(markdown_table(["class", "tried", "clean", "wrote", "skipped"], table))
    for case, outcome in failures:
        print(f"NOT CLEAN: {case.kind}: {case.name}: {outcome}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

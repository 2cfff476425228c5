"""The hostile-input campaign: inputs outside the config table of bad_inputs.py, each
through a `hookbus` subprocess, by class.

    .venv/bin/python benchmarks/hostile_inputs.py [--only CLASS ...] [--name TEXT ...] [--timeout S]

Classes: code execution (a file in the working directory named like a library),
loader workers (a corrupt image with workers), checkpoint contents (a newest checkpoint
with a valid checksum but contents that do not fit), unbounded reads (a device, a FIFO
or a huge sparse file as the recipe), write failures (a full disk, /dev/full as
standard output), environment (malformed distributed variables, a rendezvous that never
completes) and run directory (the wrong kind of entry by a name hookbus writes);
embed and export (an output over the command's own input, images it cannot use, extreme
sizes and worker counts, a full disk, a read-only folder) and end of run (two SIGTERMs or
a SIGKILL inside the end-of-run evaluation report, then a rerun).

A case is handled cleanly when the process ends within the timeout without a traceback
and with the outcome the docs promise: for a refusal, exit status 2 (a user error) or 1
(a write or rendezvous failure) and one line on stderr; for code execution, the planted
file never ran. "wrote" counts cases that changed a run directory which they were
refused for (a refusal must leave it as it was); for an input met only once training
started (a corrupt image), whose run has begun writing, it is shown but not held
against the case; for embed and export it counts cases that changed an input or left
an output. An end-of-run case is clean when the stopped run exits 75 (SIGTERMs) or is
killed, leaves no evaluation.json, and the rerun exits 0 with an evaluation.json equal
to that of a run never stopped. Prints a table per class and the cases
that were not clean; exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import shutil
import signal
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
    "embed",
    "export",
    "end of run",
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
    harmed: Callable[[Path], bool] | None = None
    """For embed and export: whether the refused command changed an input or left an
    output in ``workdir`` (counted as "wrote")."""
    custom: Callable[[Path, float], Outcome] | None = None
    """A case that runs its own processes (end of run) and returns its outcome."""
    expect: tuple[int, ...] = (1, 2)
    """The exit statuses of a clean outcome."""
    as_user: bool = False
    """Run the command without root's right to read and enter any folder (as root:
    through ``setpriv``, the capabilities dropped), so that a mode 000 folder is one."""


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
"""What the campaign made once: the reference runs and the photo folder."""


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
    mount = small_mount(workdir, full=True)
    return ["train", DIGITS, f"checkpoint.dir={mount / 'run'}", *FAST, "-q"]


def small_mount(workdir: Path, *, full: bool = False, read_only: bool = False) -> Path:
    """``workdir/small``: a 64 KiB tmpfs, ``full`` to the last byte or ``read_only``
    (:class:`Skipped` where mounting is not allowed)."""
    mount = workdir / "small"
    mount.mkdir()
    options = "size=64k,ro" if read_only else "size=64k"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        raise Skipped(f"cannot mount a tmpfs ({done.stderr.decode().strip()[:60]})")
    if full:
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(filler, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(filler)
    return mount


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


PHOTO_RECIPE = str(ROOT / "configs" / "simclr_imagefolder_resnet18_small.yaml")


def photo_run(cache: Path) -> tuple[Path, Path]:
    """A folder of real photographs and a finished one-epoch run on it (made once per
    campaign, as the embed guide's walk-through makes them)."""
    if "photos" not in _TRAINED:
        from tests.photos import make_photo_folder

        photos = make_photo_folder(cache / "photos", per_class=8, size=40)
        run_dir = cache / "photo_run"
        done = subprocess.run(
            [
                HOOKBUS,
                "train",
                PHOTO_RECIPE,
                f"checkpoint.dir={run_dir}",
                f"data.folder.train_dir={photos / 'train'}",
                f"data.folder.test_dir={photos / 'test'}",
                "data.image_size=32",
                "data.batch_size=8",
                "optimizer.num_epochs=1",
                "meters.knn.enabled=false",
                "model.backbone.name=small_cnn",
                "model.backbone.width=8",
                "model.head.dims=[32,32,16]",
                "hooks.summary_plot.enabled=false",
                "-q",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the photo run failed: {done.stderr[-500:]}")
        _TRAINED["photos"], _TRAINED["photo_run"] = photos, run_dir
    return _TRAINED["photos"], _TRAINED["photo_run"]


def fingerprint(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every regular file under ``folder`` (links not followed): its size, modification
    time and, below 16 MiB (not the sparse giant), the SHA-256 of its bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        status = path.stat()
        small = status.st_size < 16 << 20
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if small else ""
        found[str(path.relative_to(folder))] = (status.st_size, status.st_mtime_ns, digest)
    return found


def embed_case(
    name: str,
    plant: Callable[[Path], list[str]],
    *,
    output: str = "emb.pt",
    options: tuple[str, ...] = (),
    as_user: bool = False,
) -> Case:
    """``hookbus embed RUN PHOTOS --out OUTPUT`` on a copy of the campaign's photos, after
    ``plant(photos)`` (which may return replacement image arguments); harmed when the
    photos changed or an output file appeared."""
    before: dict[str, dict[str, tuple[int, int, str]]] = {}

    def prepare(workdir: Path) -> list[str]:
        photos, run_dir = photo_run(workdir.parent)
        copy = workdir / "photos"
        shutil.copytree(photos, copy)
        images = plant(copy) or [str(copy)]
        before["photos"] = fingerprint(copy)
        out = output.replace("PHOTOS", str(copy))
        return ["embed", str(run_dir), *images, "--out", out, "-q", *options]

    def harmed(workdir: Path) -> bool:
        photos = workdir / "photos"
        out = workdir / output.replace("PHOTOS", str(photos))
        left = out.is_file() and photos not in out.parents
        return left or fingerprint(photos) != before["photos"]

    return Case("embed", name, prepare, harmed=harmed, as_user=as_user)


def nothing(photos: Path) -> list[str]:
    return []


def fifo_image(photos: Path) -> list[str]:
    os.mkfifo(photos / "train" / "pipe.jpg")
    return []


def broken_link_image(photos: Path) -> list[str]:
    (photos / "test" / "gone.jpg").symlink_to(photos / "nowhere.jpg")
    return []


def loop_folder(photos: Path) -> list[str]:
    (photos / "train" / "china" / "again").symlink_to(photos / "train")
    return []


def zero_image(photos: Path) -> list[str]:
    (photos / "test" / "zero.jpg").symlink_to("/dev/zero")
    return []


def sparse_image(photos: Path) -> list[str]:
    with (photos / "test" / "huge.jpg").open("wb") as file:
        file.truncate(8 << 30)
    return []


def truncated_image(photos: Path) -> list[str]:
    whole = (photos / "test" / "china" / "000.jpg").read_bytes()
    (photos / "test" / "china" / "cut.jpg").write_bytes(whole[: len(whole) // 3])
    return []


def garbled_image(photos: Path) -> list[str]:
    """A JPEG whose tables (bytes 20-84) are garbled: one garbled in its entropy-coded
    data still decodes, to a damaged picture, and is rightly accepted."""
    whole = bytearray((photos / "test" / "flower" / "000.jpg").read_bytes())
    whole[20:84] = bytes(range(64))
    (photos / "test" / "flower" / "garbled.jpg").write_bytes(bytes(whole))
    return []


def folder_named_jpg(photos: Path) -> list[str]:
    (photos / "test" / "album.jpg").mkdir()
    (photos / "test" / "album.jpg" / "x.txt").write_text("not an image")
    return [str(photos / "test" / "album.jpg")]


def strip_image(photos: Path) -> list[str]:
    from PIL import Image

    Image.new("RGB", (60000, 1), (200, 100, 50)).save(photos / "train" / "strip.png")
    return []


def unreadable_folder(photos: Path) -> list[str]:
    (photos / "train" / "china").chmod(0)
    return []


WITHOUT_OVERRIDE = ("setpriv", "--bounding-set=-dac_override,-dac_read_search")
"""A command prefix that takes from root the capabilities to read any file and enter
any folder: permissions apply to it as to any user."""


def full_disk_embed(workdir: Path) -> list[str]:
    photos, run_dir = photo_run(workdir.parent)
    mount = small_mount(workdir, full=True)
    return ["embed", str(run_dir), str(photos), "--out", str(mount / "emb.csv"), "-q"]


def read_only_embed(workdir: Path) -> list[str]:
    photos, run_dir = photo_run(workdir.parent)
    mount = small_mount(workdir, read_only=True)
    return ["embed", str(run_dir), str(photos), "--out", str(mount / "emb.npz"), "-q"]


def left_on_mount(workdir: Path) -> bool:
    """Whether a failed write left anything beside the filler on the small mount."""
    return bool(set(os.listdir(workdir / "small")) - {"filler"})


def export_case(name: str, make: Callable[[Path, Path], tuple[str, str]]) -> Case:
    """``hookbus export SOURCE OUT`` with ``make(workdir, run copy)`` giving both; harmed
    when the run's files changed."""
    before: dict[str, dict[str, tuple[int, int, str]]] = {}

    def prepare(workdir: Path) -> list[str]:
        run_dir = workdir / "run"
        shutil.copytree(trained_run(workdir.parent), run_dir, symlinks=True)
        source, out = make(workdir, run_dir)
        before["run"] = fingerprint(run_dir)
        return ["export", source, out]

    def harmed(workdir: Path) -> bool:
        return fingerprint(workdir / "run") != before["run"]

    return Case("export", name, prepare, harmed=harmed)


def newest(run_dir: Path) -> str:
    return str((run_dir / "checkpoint.torch").resolve())


def mounted_export(*, read_only: bool) -> Callable[[Path, Path], tuple[str, str]]:
    def make(workdir: Path, run_dir: Path) -> tuple[str, str]:
        mount = small_mount(workdir, full=not read_only, read_only=read_only)
        return newest(run_dir), str(mount / "backbone.pth")

    return make


def fifo_checkpoint(workdir: Path, run_dir: Path) -> tuple[str, str]:
    os.mkfifo(workdir / "pipe.torch")
    return str(workdir / "pipe.torch"), str(workdir / "backbone.pth")


def stopped_in_end_work(stop: str) -> Callable[[Path, float], Outcome]:
    """A digits run with its evaluation report, stopped (``sigterm``: two SIGTERMs 0.2 s
    apart; ``sigkill``) once it logs that its end-of-run work began, then rerun; its
    evaluation.json compared with that of a run never stopped."""

    def run(workdir: Path, timeout: float) -> Outcome:
        workdir.mkdir(parents=True)
        report = [*FAST, "hooks.evaluation_report.enabled=true"]
        clean = reference_report(workdir.parent, report)
        arguments = [HOOKBUS, "train", DIGITS, f"checkpoint.dir={workdir / 'run'}", *report]
        started = time.perf_counter()
        process = subprocess.Popen(
            [*arguments, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        log = workdir / "run" / "log.txt"
        while not (log.is_file() and "end-of-run work: " in log.read_text()):
            if process.poll() is not None or time.perf_counter() > started + timeout:
                process.kill()
                return Outcome("never reached its end-of-run work", [], 0.0, False, False)
            time.sleep(0.01)
        if stop == "sigkill":
            process.kill()
        else:
            process.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=timeout)
        early = (workdir / "run" / "evaluation.json").exists()  # the stop came too late
        lines = [line for line in err.splitlines() if line.strip()]
        last = lines[-1:] if stop == "sigterm" else ["(killed by SIGKILL)"]
        if stop == "sigterm" and not last[0].startswith("hookbus train: preempted: second"):
            last = lines  # not the preempted line: shown whole, not clean
        if any("Traceback" in line for line in lines):
            last = lines
        rerun = subprocess.run([*arguments, "-q"], capture_output=True, text=True)
        report_file = workdir / "run" / "evaluation.json"
        same = report_file.is_file() and report_file.read_text() == clean
        seconds = time.perf_counter() - started
        if rerun.returncode != 0 or not same:
            status: int | str = (
                f"stopped {process.returncode}, rerun {rerun.returncode}, report "
                f"{'equal' if same else 'missing or different'}: {rerun.stderr[-160:]}"
            )
            return Outcome(status, last, seconds, early, False)
        return Outcome(process.returncode, last, seconds, early, False)

    return run


def reference_report(cache: Path, overrides: list[str]) -> str:
    """The evaluation.json of the run never stopped (trained once per campaign)."""
    if "report" not in _TRAINED:
        run_dir = cache / "reference_report"
        done = subprocess.run(
            [HOOKBUS, "train", DIGITS, f"checkpoint.dir={run_dir}", *overrides, "-q"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the reference report run failed: {done.stderr[-500:]}")
        _TRAINED["report"] = run_dir
    return (_TRAINED["report"] / "evaluation.json").read_text()


def nothing_args(workdir: Path) -> list[str]:
    return []


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
    embed_case(
        "--out is an input image (--overwrite)",
        nothing,
        output="PHOTOS/test/china/000.jpg",
        options=("--format", "pt", "--overwrite"),
    ),
    embed_case("--out inside the input folder", nothing, output="PHOTOS/emb.pt"),
    embed_case("--out is /dev/full", nothing, output="/dev/full", options=("--format", "pt")),
    embed_case("a FIFO named .jpg", fifo_image),
    embed_case("a broken link named .jpg", broken_link_image),
    embed_case("a symbolic link loop of folders", loop_folder),
    embed_case("a link to /dev/zero named .jpg", zero_image),
    embed_case("an 8 GiB sparse .jpg", sparse_image),
    embed_case("a truncated JPEG", truncated_image),
    embed_case("a JPEG garbled in its header", garbled_image),
    embed_case("a folder named .jpg given as an image", folder_named_jpg),
    embed_case("a folder that cannot be listed", unreadable_folder, as_user=True),
    embed_case("a 60000 x 1 strip", strip_image),
    embed_case("--image-size 100000", nothing, options=("--image-size", "100000")),
    embed_case("--num-workers 100000", nothing, options=("--num-workers", "100000")),
    embed_case("--batch-size 100000000", nothing, options=("--batch-size", "100000000")),
    Case("embed", "--out on a full disk", full_disk_embed, harmed=left_on_mount),
    Case("embed", "--out in a read-only folder", read_only_embed, harmed=left_on_mount),
    export_case("out is the checkpoint", lambda w, run: (newest(run), newest(run))),
    export_case(
        "out is the run's config.yaml via ..",
        lambda w, run: (newest(run), str(run / ".." / "run" / "config.yaml")),
    ),
    export_case("the checkpoint is a FIFO", fifo_checkpoint),
    export_case("out on a full disk", mounted_export(read_only=False)),
    export_case("out in a read-only folder", mounted_export(read_only=True)),
    Case(
        "end of run",
        "two SIGTERMs in the evaluation report, rerun",
        nothing_args,
        custom=stopped_in_end_work("sigterm"),
        expect=(75,),
    ),
    Case(
        "end of run",
        "SIGKILL in the evaluation report, rerun",
        nothing_args,
        custom=stopped_in_end_work("sigkill"),
        expect=(-signal.SIGKILL,),
    ),
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
        return self.status in case.expect and len(self.error_lines) == 1 and not wrote

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
    if case.custom is not None:
        return case.custom(workdir, timeout)
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
        root = case.as_user and os.geteuid() == 0
        done = subprocess.run(
            [*(WITHOUT_OVERRIDE if root else ()), HOOKBUS, *args],
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
    if case.harmed is not None:
        wrote = case.harmed(workdir)
    ran = case.runs_code is not None and (workdir / case.runs_code).exists()
    if case.kind == "write failures" and "train" in args:
        subprocess.run(["umount", "-l", str(run_dir.parent)], check=False)
    if (workdir / "small").is_mount():
        subprocess.run(["umount", "-l", str(workdir / "small")], check=False)
    hostile_shards.unmount_all()
    return Outcome(status, lines, seconds, wrote, ran)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=CLASSES, help="run these classes only")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--name", nargs="*", help="run the cases whose names hold one of these")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if not args.only or case.kind in args.only]
    cases = [case for case in cases if not args.name or any(n in case.name for n in args.name)]
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

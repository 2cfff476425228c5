"""Kill a real ``hookbus train`` with SIGKILL at random moments, resume, compare.

Used by tests/integration/test_kill_resume.py (a few kills) and benchmarks/kill_resume.py (many).
The run is a tiny recipe with a checkpoint after every train iteration, so kills land
between steps, inside steps and inside checkpoint writes alike.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from hookbus.engine.checkpoint.checkpoint_io import list_checkpoints, newest_valid_checkpoint

ROOT = Path(__file__).resolve().parents[1]

RECIPE = {
    "trainer": {
        "imports": ["tests.tiny_data"],
        "import_paths": [str(ROOT)],
        "log_frequency": 5,
        "test_every_num_epochs": 4,
    },
    "data": {"name": "tiny_test_images", "image_size": 8, "batch_size": 8, "test_batch_size": 8},
    "model": {"backbone": {"width": 4}, "head": {"dims": [16, 16, 8]}},
    "optimizer": {"num_epochs": 12, "warmup_epochs": 1},
    "meters": {"knn": {"k": 3}},
    "checkpoint": {"iter_frequency": 1, "keep_last": 2},
    # no curves.png at the end (matplotlib's import and a render: about 1.5 s a run)
    "hooks": {
        "progress_bar": {"enabled": False},
        "tensorboard": {"enabled": False},
        "summary_plot": {"enabled": False},
    },
    "machine": {"num_threads": 1},
}


@dataclass
class Outcome:
    """What a campaign of kills did, and whether the result matched."""

    kills: int = 0
    kills_in_writes: int = 0
    kills_before_training: int = 0
    restarts: int = 0
    window: float = 0.0
    identical_parameters: bool = False
    identical_losses: bool = False
    identical_metrics_file: bool = False
    identical_iteration: bool = False
    notes: list[str] = field(default_factory=list)


def write_recipe(path: Path, epochs: int, sections: dict[str, dict] | None = None) -> Path:
    """The harness recipe, ``epochs`` long, each of ``sections`` updating the recipe's
    section of that name, as a YAML file."""
    recipe = {name: dict(values) for name, values in RECIPE.items()}
    for name, values in (sections or {}).items():
        recipe.setdefault(name, {}).update(values)
    recipe["optimizer"]["num_epochs"] = epochs
    path.write_text(yaml.safe_dump(recipe))
    return path


def command(recipe: Path, run_dir: Path) -> list[str]:
    """The ``hookbus train`` command line for ``run_dir``."""
    return [
        sys.executable,
        "-m",
        "hookbus",
        "train",
        str(recipe),
        f"checkpoint.dir={run_dir}",
        "-q",
    ]


def run_to_completion(recipe: Path, run_dir: Path) -> None:
    """Run (or resume) until the run finishes; raise if it fails."""
    result = subprocess.run(
        command(recipe, run_dir), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        raise RuntimeError(f"hookbus train failed ({result.returncode}): {result.stderr[-2000:]}")


def timed_run(recipe: Path, run_dir: Path) -> float:
    """Run ``recipe`` to completion; the seconds of training: from config.yaml (written
    just before ``on_start``) to the final checkpoint. What follows (the last plot, the
    interpreter's exit) is left out: a kill there cannot interrupt training."""
    run_to_completion(recipe, run_dir)
    final = list_checkpoints(run_dir)[-1]
    return final.stat().st_mtime - (run_dir / "config.yaml").stat().st_mtime


def run_here(recipe: Path, run_dir: Path) -> None:
    """:func:`run_to_completion` through ``hookbus train``'s entry point in this process:
    the same command without a second interpreter's start (torch's and hookbus's imports,
    about 4 s of CPU), for a reference run that no test stops or kills."""
    from hookbus.cli import main

    status = main(["train", str(recipe), f"checkpoint.dir={run_dir}", "-q"])
    if status != 0:
        raise RuntimeError(f"hookbus train failed ({status}) in this process")


def timed_run_here(recipe: Path, run_dir: Path) -> float:
    """:func:`timed_run` in this process (:func:`run_here`)."""
    run_here(recipe, run_dir)
    final = list_checkpoints(run_dir)[-1]
    return final.stat().st_mtime - (run_dir / "config.yaml").stat().st_mtime


def final_parameters(run_dir: Path) -> dict[str, torch.Tensor]:
    """The model weights of the newest valid checkpoint."""
    found = newest_valid_checkpoint(run_dir)
    assert found is not None, f"no checkpoint in {run_dir}"
    return found[1]["model"]


def phase_losses(run_dir: Path) -> list[tuple[int, float]]:
    """(phase index, mean loss) of each line of metrics.json, in file order."""
    rows = [json.loads(line) for line in (run_dir / "metrics.json").read_text().splitlines()]
    return [(row["phase_idx"], row["loss"]) for row in rows]


def kill_campaign(
    workdir: Path,
    kills: int,
    *,
    seed: int = 0,
    window: float | None = None,
    epochs: int = 12,
    sections: dict[str, dict] | None = None,
    reference_here: bool = False,
) -> Outcome:
    """Kill a run ``kills`` times, each a random 0-``window`` seconds after training
    starts, finish it, and compare it with an uninterrupted run of the same recipe.

    ``window=None`` sizes the window from the uninterrupted run: all kills together can
    cover at most half of its training time, so the planned kills always happen before
    the run ends, however fast or slow the machine is. ``sections`` change the recipe
    (another SSL method, say), as in :func:`write_recipe`. ``reference_here`` trains the
    uninterrupted run, and finishes the killed one after its last kill, in this process
    (:func:`timed_run_here`, :func:`run_here`); the runs that are killed are always
    processes of their own."""
    rng = random.Random(seed)
    recipe = write_recipe(workdir / "recipe.yaml", epochs, sections)
    reference, victim = workdir / "reference", workdir / "victim"
    training_seconds = (timed_run_here if reference_here else timed_run)(recipe, reference)
    if window is None:
        window = training_seconds / (2 * kills)
    outcome = Outcome(window=window)
    while outcome.kills < kills:
        started = time.time()
        process = subprocess.Popen(
            command(recipe, victim),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        outcome.restarts += 1
        training = _wait_for_training(victim, process, started)
        if process.poll() is not None:
            if process.returncode != 0:
                raise RuntimeError(f"victim run failed: {process.stderr.read()[-2000:]}")
            outcome.notes.append("the run finished before the planned kills")
            break
        time.sleep(rng.uniform(0.0, window))
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()
        outcome.kills += 1
        outcome.kills_before_training += 0 if training else 1
        # A process killed before it made its run directory (a slow start) left none.
        if victim.is_dir() and any(
            p.name.startswith(".") and ".tmp-" in p.name for p in victim.iterdir()
        ):
            outcome.kills_in_writes += 1
    # The run finishing after the kills is a normal resume: in this process too where the
    # reference is (only the killed runs must be processes of their own).
    (run_here if reference_here else run_to_completion)(recipe, victim)
    expected, got = final_parameters(reference), final_parameters(victim)
    outcome.identical_parameters = expected.keys() == got.keys() and all(
        torch.equal(expected[name], got[name]) for name in expected
    )
    outcome.identical_losses = phase_losses(reference) == phase_losses(victim)
    outcome.identical_metrics_file = (reference / "metrics.json").read_bytes() == (
        victim / "metrics.json"
    ).read_bytes()
    outcome.identical_iteration = (
        newest_valid_checkpoint(reference)[1]["iteration"]
        == newest_valid_checkpoint(victim)[1]["iteration"]
    )
    return outcome


def _wait_for_training(run_dir: Path, process: subprocess.Popen, started: float) -> bool:
    """Wait until the process started at ``started`` writes config.yaml (just before
    on_start); False if it ends first or takes a minute."""
    config = run_dir / "config.yaml"
    while time.time() < started + 60 and process.poll() is None:
        if config.exists() and config.stat().st_mtime >= started:
            return True
        time.sleep(0.02)
    return False

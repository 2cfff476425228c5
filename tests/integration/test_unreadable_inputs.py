"""A file or folder hookbus reads but may not (mode 000) is one line naming it, exit
status 2, and nothing written: a recipe, the checkpoint ``hookbus export`` reads (given
itself or through its run directory), ``hookbus eval``'s labelled folder, the
``curves.json`` ``hookbus plot`` reads and a backbone's weights file.

Each command runs in a process for which permissions hold: as root, without the
capabilities that read any file and enter any folder (dropped with ``setpriv``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.eval_runs import photo_settings, write_run
from tests.integration.test_bad_inputs_weights import good_pth, recipe
from tests.kill_harness import ROOT
from tests.photos import make_photo_folder
from tests.runner.test_plot_safety import make_run

WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
"""As root: without the capabilities to read any file and enter any folder."""


def a_recipe(folder: Path) -> tuple[list[str | Path], Path, str]:
    path = folder / "tiny.yaml"
    path.write_text("trainer: {}\n")
    run = folder / "run"
    arguments = ["train", path, f"checkpoint.dir={run}"]
    line = f"hookbus train: error: cannot read config file {path}: Permission denied"
    return arguments, path, line


def a_recipe_in_a_closed_folder(folder: Path) -> tuple[list[str | Path], Path, str]:
    (folder / "recipes").mkdir()
    path = folder / "recipes" / "tiny.yaml"
    path.write_text("trainer: {}\n")
    arguments = ["validate", path]
    line = f"hookbus validate: error: cannot read config file {path}: Permission denied"
    return arguments, folder / "recipes", line


def photo_run(folder: Path) -> tuple[Path, Path]:
    photos = make_photo_folder(folder / "photos", per_class=2, size=32)
    return photos, write_run(folder / "run", photo_settings(photos))


def a_checkpoint_exported(folder: Path) -> tuple[list[str | Path], Path, str]:
    _, checkpoint = photo_run(folder)
    arguments = ["export", checkpoint, folder / "out" / "backbone.pth"]
    line = f"hookbus export: error: cannot read checkpoint {checkpoint}: Permission denied"
    return arguments, checkpoint, line


def a_run_exported(folder: Path) -> tuple[list[str | Path], Path, str]:
    _, checkpoint = photo_run(folder)
    arguments = ["export", checkpoint.parent, folder / "out" / "backbone.pth"]
    line = (
        f"hookbus export: error: no valid checkpoint in {checkpoint.parent}: cannot read "
        f"checkpoint {checkpoint}: Permission denied"
    )
    return arguments, checkpoint, line


def a_labelled_folder(folder: Path) -> tuple[list[str | Path], Path, str]:
    photos, checkpoint = photo_run(folder)
    arguments = ["eval", checkpoint.parent, photos, "--out", folder / "out", "-q"]
    line = (
        f"hookbus eval: error: cannot read labelled folder {photos}: {photos / 'train'}: "
        "Permission denied"
    )
    return arguments, photos, line


def curves(folder: Path) -> tuple[list[str | Path], Path, str]:
    run = make_run(folder / "run")
    arguments = ["plot", run, "-o", folder / "out" / "curves.png"]
    line = f"hookbus plot: error: cannot read curves file {run / 'curves.json'}: Permission denied"
    return arguments, run / "curves.json", line


def a_weights_file(folder: Path) -> tuple[list[str | Path], Path, str]:
    weights = good_pth(folder / "weights.pth")
    run = folder / "run"
    arguments = [
        "train",
        recipe(folder),
        f"checkpoint.dir={run}",
        f"model.backbone.weights={weights}",
    ]
    line = (
        f"hookbus train: error: model.backbone.weights: cannot read weights file {weights}: "
        "Permission denied"
    )
    return arguments, weights, line


CASES = {
    "a recipe": a_recipe,
    "a recipe in a folder that cannot be entered": a_recipe_in_a_closed_folder,
    "the checkpoint export reads": a_checkpoint_exported,
    "the checkpoint of a run directory export reads": a_run_exported,
    "eval's labelled folder": a_labelled_folder,
    "curves.json": curves,
    "a weights file": a_weights_file,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_what_may_not_be_read_is_one_line_naming_it_and_nothing_is_written(
    case: str, tmp_path: Path
) -> None:
    arguments, locked, line = CASES[case](tmp_path)
    before = sorted(path.name for path in tmp_path.iterdir())
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    locked.chmod(0)
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "hookbus", *map(str, arguments)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        locked.chmod(0o755 if locked.is_dir() else 0o644)
    assert (done.returncode, done.stderr) == (2, line + "\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == before

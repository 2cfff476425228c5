"""Nothing is imported from the working directory unless the user asks for it.

A file in the working directory named like a library hookbus imports lazily (``sklearn.py``,
``torchvision.py``, ``yaml.py``, ``PIL.py``, ``timm.py``) never runs, with the ``hookbus``
command or ``python -m hookbus``. A recipe's own modules are imported from the folders of
``trainer.import_paths`` (relative to the recipe's folder, or absolute) or ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hookbus.config import load_config
from hookbus.engine.config.imports import import_user_modules
from hookbus.engine.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "simclr_digits.yaml"
HOOKBUS = Path(sys.executable).with_name("hookbus")
LIBRARIES = ("sklearn", "torchvision", "yaml", "PIL", "timm")
MARKER = "import os\nopen(os.path.join(os.path.dirname(__file__), 'RAN_' + __name__), 'w')\n"
ONE_QUICK_EPOCH = (
    "optimizer.num_epochs=1",
    "data.batch_size=256",
    "trainer.test_every_num_epochs=100",
    "model.backbone.width=4",
    "model.head.dims=[16,16,8]",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "hooks.tensorboard.enabled=false",
    "hooks.summary_plot.enabled=false",
)


def plant_libraries(folder: Path) -> None:
    """A module per library in ``folder`` that, if it ever runs, leaves a RAN_<name> file."""
    for name in LIBRARIES:
        (folder / f"{name}.py").write_text(MARKER)


def markers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob("RAN_*"))


def run_in(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_hookbus_train_runs_no_file_of_the_working_directory(tmp_path: Path) -> None:
    plant_libraries(tmp_path)
    done = run_in(
        tmp_path, str(HOOKBUS), "train", str(RECIPE), "checkpoint.dir=run", *ONE_QUICK_EPOCH
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert markers(tmp_path) == []
    assert (tmp_path / "run" / "config.yaml").is_file()


@pytest.mark.slow
def test_python_m_hookbus_validate_runs_no_file_of_the_working_directory(
    tmp_path: Path,
) -> None:
    plant_libraries(tmp_path)
    done = run_in(tmp_path, sys.executable, "-m", "hookbus", "validate", str(RECIPE))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{RECIPE}: valid"
    assert markers(tmp_path) == []


def test_a_module_of_the_working_directory_is_not_importable_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cwd_only_module.py").write_text(MARKER)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="cannot import 'cwd_only_module'.*import_paths"):
        import_user_modules(["cwd_only_module"])
    assert markers(tmp_path) == []


def write_project(folder: Path, module: str, import_paths: list[str]) -> Path:
    """``folder/src/<module>.py`` (it leaves a marker) and ``folder/recipe.yaml`` that
    imports it from ``import_paths``; the recipe's path."""
    (folder / "src").mkdir()
    (folder / "src" / f"{module}.py").write_text(MARKER)
    recipe = folder / "recipe.yaml"
    trainer = {"imports": [module], "import_paths": import_paths}
    recipe.write_text(yaml.safe_dump({"trainer": trainer}))
    return recipe


def test_a_relative_import_path_is_read_from_the_recipes_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = write_project(tmp_path, "user_module_relative", ["src"])
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    cfg = load_config(recipe)
    assert cfg.trainer.import_paths == [str(tmp_path / "src")]
    import_user_modules(cfg.trainer.imports, cfg.trainer.import_paths)
    assert markers(tmp_path / "src") == ["RAN_user_module_relative"]
    assert sys.path[0] == str(tmp_path / "src")


def test_a_relative_import_path_in_an_override_is_read_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = write_project(tmp_path, "user_module_override", [])
    monkeypatch.chdir(tmp_path)
    cfg = load_config(recipe, ["trainer.import_paths=[src]"])
    assert cfg.trainer.import_paths == [str(tmp_path / "src")]


def test_an_absolute_import_path_is_kept_and_imports_the_users_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = write_project(tmp_path, "user_module_absolute", [str(tmp_path / "src")])
    monkeypatch.setattr(sys, "path", list(sys.path))
    cfg = load_config(recipe)
    assert cfg.trainer.import_paths == [str(tmp_path / "src")]
    import_user_modules(cfg.trainer.imports, cfg.trainer.import_paths)
    assert markers(tmp_path / "src") == ["RAN_user_module_absolute"]


def test_import_paths_change_nothing_on_sys_path_when_not_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = list(sys.path)
    import_user_modules(["os.path"])
    assert sys.path == before


@pytest.mark.parametrize("entry", ["no_such_folder", "", "recipe.yaml"])
def test_an_import_path_that_is_not_a_folder_is_refused_naming_it(
    tmp_path: Path, entry: str
) -> None:
    (tmp_path / "recipe.yaml").write_text("{}\n")
    path = str(tmp_path / entry) if entry else entry
    with pytest.raises(ConfigError, match=r"^trainer\.import_paths: .* is not a folder$"):
        import_user_modules([], [path])

"""The built wheel installs one import name, ``hookbus``, and lives beside a user's own
``hooks.py`` and ``engine.py``; installed into a throwaway environment it runs from an
empty directory: the recipes by name, a short training run, an export, the tutorials'
examples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "hookbus", "engine", "parts", "hooks")
SOURCES += ("steps", "configs", "examples")
QUIET_OFFLINE = ("-q", "--no-deps", "--no-index")
RECIPES = sorted(path.name for path in (ROOT / "configs").glob("*.yaml"))
EXAMPLES = sorted(path.name for path in (ROOT / "examples").glob("*.py"))
TINY = (
    "optimizer.num_epochs=1",
    "trainer.test_every_num_epochs=100",
    "hooks.evaluation_report.enabled=false",
    "hooks.progress_bar.enabled=false",
    "model.backbone.width=8",
    "model.head.dims=[32,32,16]",
)
"""Overrides that make the digits recipe's one epoch take a second or two."""

USER_SCRIPT = """
import hooks, engine
import hookbus
from hookbus import SSLTrainer, default_hooks, load_config, FakeEngine, Hook, SSLEvents
from hookbus.hooks.log import LogHook
assert hooks.OWNER == "user" and engine.OWNER == "user", "the user's modules were replaced"
print(hookbus.__file__)
print(sorted(hook.name for hook in default_hooks(load_config("recipe.yaml"))))
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it, by ``python -m build`` from a copy of the
    sources (nothing is written into the checkout); offline, with this environment's
    setuptools."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name,
                source / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (built,) = dist.glob("hookbus-*.whl")
    return built


@pytest.fixture(scope="module")
def env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway environment holding the wheel; it reuses this one's dependencies."""
    env = tmp_path_factory.mktemp("env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    env_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The throwaway environment reuses the project's dependencies (torch and the rest)
    # through a path entry; the .pth files there, such as the editable install's import
    # hook for this checkout, are not run from it.
    (Path(env_site) / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"])
    subprocess.run(
        [python, "-m", "pip", "install", *QUIET_OFFLINE, "--ignore-installed", str(wheel)],
        check=True,
        capture_output=True,
    )
    return env


@pytest.mark.slow
def test_the_wheel_holds_only_the_hookbus_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"hookbus", "hookbus-0.1.0.dist-info"}
    for module in (
        "engine/bus/bus_engine.py",
        "parts/losses/moco.py",
        "hooks/log.py",
        "steps/standard.py",
    ):
        assert f"hookbus/{module}" in names
    assert "hookbus/py.typed" in names
    assert sorted(n.removeprefix("hookbus/recipes/") for n in names if n.endswith(".yaml")) == (
        RECIPES
    )
    for name in EXAMPLES:
        assert f"hookbus/examples/{name}" in names
    assert "hookbus/recipes/__init__.py" in names
    entry_points = zipfile.ZipFile(wheel).read("hookbus-0.1.0.dist-info/entry_points.txt")
    assert b"hookbus = hookbus.cli:main" in entry_points


@pytest.mark.slow
def test_the_sdist_holds_the_recipes_and_the_examples(dist: Path) -> None:
    (sdist,) = dist.glob("hookbus-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    for name in RECIPES:
        assert f"hookbus-0.1.0/configs/{name}" in names
    for name in EXAMPLES:
        assert f"hookbus-0.1.0/examples/{name}" in names


@pytest.mark.slow
def test_an_installed_wheel_imports_beside_a_users_hooks_and_engine_modules(
    env: Path, tmp_path: Path
) -> None:
    python = env / "bin" / "python"
    user = tmp_path / "project"
    user.mkdir()
    (user / "hooks.py").write_text('OWNER = "user"\n')
    (user / "engine.py").write_text('OWNER = "user"\n')
    (user / "recipe.yaml").write_text("data: {name: digits}\n")
    done = subprocess.run(
        [python, "-c", USER_SCRIPT], cwd=user, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    location, hook_names = done.stdout.splitlines()
    assert Path(location).is_relative_to(env)
    assert "log" in hook_names and "checkpoint" in hook_names
    helped = subprocess.run(
        [env / "bin" / "hookbus", "--help"], cwd=user, capture_output=True, text=True
    )
    assert helped.returncode == 0 and "usage: hookbus" in helped.stdout


def run_in(env: Path, cwd: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    """``argv`` run in ``cwd`` with the environment's scripts first on PATH, nothing of
    the checkout on the import path, and caches outside ``cwd``; it must exit 0."""
    outside = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    environ = {key: value for key, value in os.environ.items() if key not in outside}
    environ["PATH"] = f"{env / 'bin'}{os.pathsep}{environ.get('PATH', '/usr/bin:/bin')}"
    environ["MPLCONFIGDIR"] = str(env / "matplotlib")
    done = subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, capture_output=True, text=True, env=environ
    )
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


@pytest.mark.slow
def test_from_an_empty_directory_the_recipes_train_export_and_examples_work(
    env: Path, tmp_path: Path
) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    hookbus = env / "bin" / "hookbus"
    listed = run_in(env, work, hookbus, "recipes").stdout.splitlines()
    rows = {line.split()[0]: line.split()[1] for line in listed[1:]}
    assert sorted(rows) == [name.removesuffix(".yaml") for name in RECIPES]
    assert rows["simclr_digits"] == "nt_xent" and rows["moco_digits"] == "moco"
    shown = run_in(env, work, hookbus, "recipes", "--show", "simclr_digits").stdout
    assert shown == (ROOT / "configs" / "simclr_digits.yaml").read_text()

    trained = run_in(
        env, work, hookbus, "train", "simclr_digits", "checkpoint.dir=run", *TINY, "-q"
    )
    assert trained.stdout.startswith("done: 1 phases run (1-1 of 1, fresh start); 5 train")
    metrics = [
        json.loads(line) for line in (work / "run" / "metrics.json").read_text().splitlines()
    ]
    assert [row["phase"] for row in metrics] == ["train"]
    exported = run_in(env, work, hookbus, "export", "run/checkpoint.torch", "backbone.pth")
    assert exported.stdout.startswith("wrote backbone.pth: ")
    assert (work / "backbone.pth").stat().st_size > 0
    assert sorted(path.name for path in work.iterdir()) == ["backbone.pth", "run"]

    script = (
        "import hookbus\n"
        "from hookbus.examples.grad_norm_hook import GradNormHook\n"
        "from hookbus.examples.plain_step import plain_step\n"
        "from hookbus.examples.align_uniform import AlignUniformLoss\n"
        "from hookbus.recipes_index import resolve_recipe\n"
        "print(hookbus.__file__); print(resolve_recipe('simclr_digits'))\n"
        "print(GradNormHook.__module__)"
    )
    done = run_in(env, work, env / "bin" / "python", "-c", script)
    location, recipe, module = done.stdout.split()
    for path in (Path(location), Path(recipe)):
        assert path.is_relative_to(env) and not path.is_relative_to(ROOT)
    assert Path(recipe).parts[-3:] == ("hookbus", "recipes", "simclr_digits.yaml")
    assert module == "hookbus.examples.grad_norm_hook"

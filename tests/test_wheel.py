"""The built wheel installs one import name, ``hookbus``, and lives beside a user's own
``hooks.py`` and ``engine.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "hookbus", "engine", "parts", "hooks")
SOURCES += ("steps",)
QUIET_OFFLINE = ("-q", "--no-deps", "--no-index")

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
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (nothing is written into the checkout)."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", *QUIET_OFFLINE, "--no-build-isolation"]
    subprocess.run(
        [*build, "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("hookbus-*.whl")
    return built


def test_the_wheel_holds_only_the_hookbus_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"hookbus", "hookbus-0.1.0.dist-info"}
    for module in ("engine/bus.py", "parts/losses/moco.py", "hooks/log.py", "steps/standard.py"):
        assert f"hookbus/{module}" in names
    assert "hookbus/py.typed" in names
    entry_points = zipfile.ZipFile(wheel).read("hookbus-0.1.0.dist-info/entry_points.txt")
    assert b"hookbus = hookbus.cli:main" in entry_points


def test_an_installed_wheel_imports_beside_a_users_hooks_and_engine_modules(
    wheel: Path, tmp_path: Path
) -> None:
    env = tmp_path / "env"
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

"""The house: one ``hookbus`` namespace, floors that import only downwards.

Floors, lowest first: the kernel (``engine/`` = ``hookbus.engine``), the parts
(``parts/`` = ``hookbus.parts``), hooks and steps (``hooks/``, ``steps/``), and the
runner with the public API (``hookbus/``). See docs/concepts.md.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hookbus

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"engine": "hookbus.engine", "parts": "hookbus.parts", "hooks": "hookbus.hooks"}
FOLDERS |= {"steps": "hookbus.steps", "hookbus": "hookbus"}
FLOOR = {"hookbus.engine": 0, "hookbus.parts": 1, "hookbus.hooks": 2, "hookbus.steps": 2}
SHIPPED = {"configs": "hookbus.recipes", "examples": "hookbus.examples"}
"""Folders installed beside the library, outside its floors: the recipes (YAML as package
data) and the tutorials' examples, which use the public face like a user's code."""
LAZY_IMPORTS = {("hookbus.cli", "hookbus.commands")}
"""Imports inside a function, each for a reason other than a cycle: the command line
loads the commands module (torch, torchvision, the trainer: about 5 s) only when a
command runs in this process, never for --help or the local launcher's parent."""
OLD_IMPORT = re.compile(r"^\s*(?:from|import) (?:engine|hooks|steps)(?:\.\w+)*(?: |$)", re.M)


def library_modules() -> dict[str, Path]:
    """``{dotted module name: file}`` of every module the distribution installs."""
    modules = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def floor_of(module: str) -> tuple[str, int]:
    """The floor a module of the distribution stands on: its room and its height."""
    for room, height in FLOOR.items():
        if module == room or module.startswith(room + "."):
            return room, height
    return "hookbus", 3


def imported_modules(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, at module level)`` of every ``hookbus`` import in the file."""
    tree = ast.parse(path.read_text())
    top_level = set()
    for node in tree.body:
        top_level.add(node)
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks
            top_level.update(node.body)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name == "hookbus" or name.startswith("hookbus."):
                found.append((node.lineno, name, node in top_level))
    return found


def test_every_library_module_is_in_a_listed_package() -> None:
    packages = {name for name, path in library_modules().items() if path.name == "__init__.py"}
    packages |= set(SHIPPED.values())
    setup = (ROOT / "setup.cfg").read_text()
    listed = set(re.search(r"packages =\n((?:    .+\n)+)", setup).group(1).split())
    assert packages == listed


@pytest.mark.parametrize("module", sorted(library_modules()))
def test_a_module_imports_only_its_own_floor_or_those_below(module: str) -> None:
    room, height = floor_of(module)
    for line, imported, _ in imported_modules(library_modules()[module]):
        if imported == "hookbus":
            pytest.fail(f"{module}:{line} imports the public face `hookbus` from inside")
        other_room, other_height = floor_of(imported)
        assert other_height <= height, f"{module}:{line} imports {imported} from a floor above"
        if height == 2:
            assert other_room in (room, "hookbus.engine", "hookbus.parts"), (
                f"{module}:{line}: hooks and steps do not import each other ({imported})"
            )


@pytest.mark.parametrize("module", sorted(library_modules()))
def test_no_import_hides_inside_a_function(module: str) -> None:
    inner = [
        f"line {line}: {name}"
        for line, name, top in imported_modules(library_modules()[module])
        if not top and (module, name) not in LAZY_IMPORTS
    ]
    assert inner == []


def test_nothing_imports_the_old_top_level_names() -> None:
    files = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")]
    for folder in (*FOLDERS, "tests", "benchmarks", "examples"):
        files += (ROOT / folder).rglob("*.py")
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path in files
        for match in OLD_IMPORT.finditer(path.read_text())
    ]
    assert offenders == []


def test_importing_the_kernel_loads_neither_torch_models_nor_the_trainer() -> None:
    script = """
import importlib, pkgutil, sys
import hookbus.engine.errors
assert "torch" not in sys.modules, "the errors module alone needs no torch"
import hookbus.engine
for module in pkgutil.iter_modules(hookbus.engine.__path__):
    importlib.import_module("hookbus.engine." + module.name)
heavy = ("torchvision", "sklearn", "matplotlib", "hookbus.parts", "hookbus.hooks",
         "hookbus.steps", "hookbus.trainer")
print(sorted(name for name in sys.modules if name.startswith(heavy)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_public_api_is_importable_from_hookbus() -> None:
    from hookbus import (  # noqa: F401  (the import is the test)
        FakeEngine,
        Hook,
        Priority,
        SSLEvents,
        SSLTrainer,
        default_hooks,
        load_config,
        register_hook,
        register_train_step,
    )

    for name in hookbus.__all__:
        assert getattr(hookbus, name) is not None
    assert hookbus.SSLTrainer.__module__ == "hookbus.trainer"
    with pytest.raises(AttributeError, match="no attribute 'Trainer'"):
        _ = hookbus.Trainer


def test_the_command_line_starts_without_torch() -> None:
    script = "import sys, hookbus.cli; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "False"

"""The tests stand on the floors of the house: each test file in the folder of what it tests.

``tests/kernel``, ``tests/parts``, ``tests/hooks`` and ``tests/steps`` hold the tests of one
floor each: a file there imports the library only from its floor and the floors below
(hooks and steps not from each other), and starts no process. Any floor's tests may drive
the harness: :mod:`hookbus.testing` (``FakeEngine``, ``tiny_config``) and the trainer that
runs a tiny config. ``tests/runner`` (the trainer, the command line, export, embed) and
``tests/integration`` (whole runs, subprocesses, torchrun, kills, the wheel, the docs) may
import anything. Helpers (``conftest.py``, ``tiny_data.py``, ...) stay at ``tests/``.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

import hookbus

TESTS = Path(__file__).resolve().parents[1]
UNIT_FLOORS = {"kernel": 0, "parts": 1, "hooks": 2, "steps": 2}
ROOMS = {"hookbus.engine": "kernel", "hookbus.parts": "parts", "hookbus.hooks": "hooks"}
ROOMS |= {"hookbus.steps": "steps"}
OPEN_FLOORS = ("runner", "integration")
CONFIG = ("hookbus.config", "hookbus.parts.config")
"""The whole config (the method sections included), which the tests of every floor build to
drive what they test: it counts as the lowest floor's, as ``tiny_config`` does."""
HARNESS = ("hookbus.testing", "hookbus.engine.bus.testing", "hookbus.trainer")
"""What any floor's tests may drive: the fake engine, the tiny config and the trainer."""
PROCESSES = ("subprocess", "multiprocessing", "torch.multiprocessing", "tests.torchrun")
PROCESSES += ("tests.kill_harness",)
"""Imports that start processes: a file making one is not a test of one floor."""


def floor_of(module: str) -> str:
    """The test floor of a library module: its room below the runner, else ``runner``."""
    if module in CONFIG:
        return "kernel"
    for room, floor in ROOMS.items():
        if module == room or module.startswith(room + "."):
            return floor
    return "runner"


def imported_modules(path: Path) -> set[str]:
    """Every module the file imports; a name of the public face ``hookbus`` counts as the
    module that defines it (``from hookbus import Config`` imports ``hookbus.parts.config``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "hookbus":
                found.add(node.module)
                continue
            for alias in node.names:
                value = getattr(hookbus, alias.name, None)
                if value is None:  # a submodule not imported yet: ``from hookbus import cli``
                    found.add(f"hookbus.{alias.name}")
                    continue
                is_module = isinstance(value, types.ModuleType)
                found.add(value.__name__ if is_module else getattr(value, "__module__", "hookbus"))
    return found


def where_it_belongs(path: Path) -> str:
    """The folder a test file belongs in, from what it imports."""
    modules = imported_modules(path)
    if any(
        module == name or module.startswith(name + ".") for module in modules for name in PROCESSES
    ):
        return "integration"
    library = {m for m in modules if m.startswith("hookbus.") and not m.startswith(HARNESS)}
    floors = {floor_of(module) for module in library}
    if not floors or "runner" in floors or {"hooks", "steps"} <= floors:
        return "runner" if floors else "integration"
    return max(floors, key=UNIT_FLOORS.__getitem__)


def misplaced(path: Path) -> str | None:
    """Why a test file stands in the wrong place, or None when it is where it belongs."""
    name = path.relative_to(TESTS).as_posix()
    belongs = where_it_belongs(path)
    hint = f"tests/{belongs}/{path.name}"
    if belongs in UNIT_FLOORS:
        hint += " (the highest floor it imports; tests/runner/ or tests/integration/ if it is"
        hint += " about whole runs)"
    if len(path.relative_to(TESTS).parts) != 2:
        return f"tests/{name} stands outside the floors: it belongs in {hint}"
    folder = path.parent.name
    if folder in OPEN_FLOORS:
        return None
    if folder not in UNIT_FLOORS:
        return f"tests/{name} is in no floor: it belongs in {hint}"
    if belongs != folder:
        return f"tests/{name} imports or starts more than tests/{folder}/ may: it belongs in {hint}"
    return None


def test_every_test_file_stands_in_the_folder_of_its_floor() -> None:
    found = [misplaced(path) for path in sorted(TESTS.rglob("test_*.py"))]
    assert [reason for reason in found if reason] == []


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


@pytest.mark.parametrize(
    ("source", "floor"),
    [
        ("from hookbus.engine.bus.bus_engine import HookBus\n", "kernel"),
        ("from hookbus import Config, FakeEngine\n", "kernel"),
        ("from hookbus import Config\nfrom hookbus.parts.losses import build_loss\n", "parts"),
        ("from hookbus import SSLTrainer\nfrom hookbus.hooks.timing import TimingHook\n", "hooks"),
        ("from hookbus.steps.standard import standard_step\n", "steps"),
        ("from hookbus.hooks import x\nfrom hookbus.steps import y\n", "runner"),
        ("from hookbus.cli import main\n", "runner"),
        ("import subprocess\nfrom hookbus.engine.bus import state\n", "integration"),
        ("from tests.kill_harness import kill_campaign\n", "integration"),
        ("from pathlib import Path\n", "integration"),
    ],
)
def test_a_test_file_belongs_in_the_floor_of_what_it_imports(
    tmp_path: Path, source: str, floor: str
) -> None:
    assert where_it_belongs(write(tmp_path / "test_x.py", source)) == floor


def test_a_test_file_at_the_root_of_tests_is_told_its_floor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    path = write(tmp_path / "test_new.py", "from hookbus.parts.losses import build_loss\n")
    assert misplaced(path) == (
        "tests/test_new.py stands outside the floors: it belongs in tests/parts/test_new.py "
        "(the highest floor it imports; tests/runner/ or tests/integration/ if it is about "
        "whole runs)"
    )


def test_a_test_file_on_a_floor_below_its_imports_is_told_its_floor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    path = write(tmp_path / "kernel" / "test_new.py", "from hookbus.cli import main\n")
    assert misplaced(path) == (
        "tests/kernel/test_new.py imports or starts more than tests/kernel/ may: it belongs in "
        "tests/runner/test_new.py"
    )


def test_a_unit_floor_starts_no_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    path = write(tmp_path / "parts" / "test_new.py", "import subprocess\n")
    assert misplaced(path) == (
        "tests/parts/test_new.py imports or starts more than tests/parts/ may: it belongs in "
        "tests/integration/test_new.py"
    )


def test_the_runner_and_integration_floors_may_import_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    source = "import subprocess\nfrom hookbus.engine.bus.bus_engine import HookBus\n"
    assert misplaced(write(tmp_path / "runner" / "test_a.py", source)) is None
    assert misplaced(write(tmp_path / "integration" / "test_b.py", source)) is None


def test_a_test_file_in_an_unknown_folder_is_told_its_floor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    path = write(
        tmp_path / "misc" / "test_new.py", "from hookbus.engine.bus.bus_engine import HookBus\n"
    )
    assert misplaced(path) == (
        "tests/misc/test_new.py is in no floor: it belongs in tests/kernel/test_new.py "
        "(the highest floor it imports; tests/runner/ or tests/integration/ if it is about "
        "whole runs)"
    )

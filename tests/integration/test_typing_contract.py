"""The hook contract is typed where a type checker sees it: in a user's own hook file,
outside the checkout, ``engine.state`` is a ``RunState`` whose fields have their types
(mypy with the hook's ``engine: RunEngine``; pyright with no annotation at all, from
``Hook``'s own), and from the repository root the ``hookbus`` folder is the whole package.

Each checker runs once on one file of cases (a checker's start is seconds); mypy shares
the checkout's cache, which ``make test`` has filled for torch and the rest."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

ANNOTATED_HOOK = """
from hookbus import Hook, RunEngine


class LossPrinter(Hook):
    def on_step(self, engine: RunEngine) -> None:
        reveal_type(engine.state.loss)
        reveal_type(engine.state.model)
        engine.state.iteration = "ten"
        engine.state.losss


from hookbus import load_config

cfg = load_config("dino_digits")
reveal_type(cfg.loss.dino.teacher_temperature)
cfg.loss.dino.teacher_temp
"""
"""Lines 7 to 10: two revealed types, a wrong assignment, a misspelt field; lines 16 and
17: a method's setting read from a loaded config, and one misspelt."""

UNANNOTATED_HOOK = """
from hookbus import Hook


class LossPrinter(Hook):
    def on_step(self, engine):
        reveal_type(engine.state.loss)
        reveal_type(engine.state.iteration)
        reveal_type(self.every_n_train_iterations(engine, 10))
"""
"""A user's hook as the README writes it: ``engine`` without an annotation."""


def checker_output(tmp_path: Path, source: str, command: list[str]) -> dict[int, list[str]]:
    """``{line: messages}`` of ``command`` run on ``source`` as ``user_hook.py`` in
    ``tmp_path``, from there (so ``hookbus`` is found installed, as a user finds it)."""
    (tmp_path / "user_hook.py").write_text(source)
    done = subprocess.run(
        [*command, "user_hook.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    messages: dict[int, list[str]] = {}
    for line, message in re.findall(r"user_hook\.py:(\d+):(?:\d+)?:? ?-? ?(.*)", done.stdout):
        messages.setdefault(int(line), []).append(message)
    assert messages, done.stdout + done.stderr
    return messages


def project_mypy_options(folder: Path) -> Path:
    """A copy of the project's mypy settings (pyproject.toml) in ``folder``, without its
    ``packages``: the same options let mypy reuse the cache that ``make test``'s own run
    filled, where other options (the default Python version, no pydantic plugin) would
    check torch again from scratch (about two minutes)."""
    text = (ROOT / "pyproject.toml").read_text()
    without_packages = re.sub(r"(?m)^packages = .*\n", "", text)
    assert without_packages != text
    config = folder / "pyproject.toml"
    config.write_text(without_packages)
    return config


@pytest.fixture(scope="module")
def mypy_says(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    folder = tmp_path_factory.mktemp("mypy")
    mypy = [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")]
    mypy += ["--config-file", str(project_mypy_options(folder))]
    return checker_output(folder, ANNOTATED_HOOK, mypy)


@pytest.fixture(scope="module")
def pyright_says(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    pyright = shutil.which("basedpyright", path=str(BIN))
    assert pyright is not None, "basedpyright is in the dev extra: run make"
    command = [pyright, "--pythonpath", sys.executable]
    return checker_output(tmp_path_factory.mktemp("pyright"), UNANNOTATED_HOOK, command)


def test_mypy_sees_the_loss_of_the_run_state_in_a_users_hook(
    mypy_says: dict[int, list[str]],
) -> None:
    assert mypy_says[7] == ['note: Revealed type is "torch._tensor.Tensor | None"']


def test_mypy_sees_the_model_the_trainer_sets_before_on_start(
    mypy_says: dict[int, list[str]],
) -> None:
    assert mypy_says[8] == ['note: Revealed type is "torch.nn.modules.module.Module"']


def test_mypy_refuses_a_value_of_the_wrong_type_for_a_field(
    mypy_says: dict[int, list[str]],
) -> None:
    (message,) = mypy_says[9]
    assert message.startswith("error: Incompatible types in assignment")
    assert 'variable has type "int"' in message


def test_mypy_refuses_a_field_the_run_state_does_not_have(
    mypy_says: dict[int, list[str]],
) -> None:
    assert mypy_says[10] == ['error: "RunState" has no attribute "losss"  [attr-defined]']


def test_mypy_sees_a_methods_setting_in_a_loaded_config(mypy_says: dict[int, list[str]]) -> None:
    assert mypy_says[16] == ['note: Revealed type is "float"']


def test_mypy_refuses_a_misspelt_method_setting(mypy_says: dict[int, list[str]]) -> None:
    (message,) = mypy_says[17]
    assert message.startswith('error: "DinoConfig" has no attribute "teacher_temp"')


def test_pyright_types_an_unannotated_override_from_the_hook_base(
    pyright_says: dict[int, list[str]],
) -> None:
    assert 'information: Type of "engine.state.loss" is "Tensor | None"' in pyright_says[7]
    assert 'information: Type of "engine.state.iteration" is "int"' in pyright_says[8]
    assert any('is "bool"' in message for message in pyright_says[9])


def test_from_the_repository_root_the_hookbus_folder_holds_every_floor() -> None:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options"]["package_dir"].strip().splitlines()
    mapping = dict(line.replace(" ", "").split("=", 1) for line in lines)
    assert mapping.pop("hookbus") == "hookbus"
    for package, folder in mapping.items():
        link = ROOT / "hookbus" / package.removeprefix("hookbus.")
        assert link.is_symlink(), f"{link} is no link"
        assert link.readlink() == Path("..", folder)

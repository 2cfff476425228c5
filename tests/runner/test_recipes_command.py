"""``hookbus recipes`` and recipe names: a command's RECIPE is a path or a shipped name."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

import hookbus.cli
import hookbus.commands
from hookbus.cli import main
from hookbus.engine.errors import ConfigError
from hookbus.recipes_index import recipe_paths, resolve_recipe

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
SHIPPED = ROOT / "configs" / "simclr_digits.yaml"


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """The arguments each command would run with (the commands themselves do not run)."""
    seen: list[argparse.Namespace] = []

    def record(args: argparse.Namespace, composed: object) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(hookbus.commands, "run", record)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return seen


def test_the_recipes_package_holds_every_file_of_configs() -> None:
    installed = files("hookbus.recipes")
    assert sorted(path.stem for path in CONFIGS) == list(recipe_paths())
    for path in CONFIGS:
        assert (installed / path.name).read_text() == path.read_text()


@pytest.mark.parametrize("command", ["train", "validate", "hooks"])
@pytest.mark.parametrize("argument", ["simclr_digits", "simclr_digits.yaml"])
def test_a_name_with_or_without_yaml_runs_the_shipped_recipe(
    command: str,
    argument: str,
    ran: list[argparse.Namespace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([command, argument, "optimizer.lr=0.3"]) == 0
    (args,) = ran
    assert Path(args.config).samefile(SHIPPED)
    assert args.overrides == ["optimizer.lr=0.3"]


def test_a_path_runs_that_file(ran: list[argparse.Namespace], tmp_path: Path) -> None:
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("optimizer: {lr: 0.5}\n")
    assert main(["train", str(recipe)]) == 0
    assert ran[0].config == str(recipe)


def test_a_file_in_the_working_directory_wins_over_the_recipe_of_that_name(
    ran: list[argparse.Namespace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("simclr_digits.yaml").write_text("optimizer: {lr: 0.5}\n")
    assert main(["validate", "simclr_digits.yaml"]) == 0
    assert ran[0].config == "simclr_digits.yaml"
    # Without the suffix no file of that exact name exists: the name picks the recipe.
    assert Path(resolve_recipe("simclr_digits")).samefile(SHIPPED)
    # A directory is no recipe file: the name still picks the recipe.
    Path("moco_digits").mkdir()
    assert Path(resolve_recipe("moco_digits")).samefile(ROOT / "configs" / "moco_digits.yaml")


@pytest.mark.parametrize("command", ["train", "validate", "hooks"])
def test_a_typo_exits_2_naming_the_close_recipes(
    command: str,
    ran: list[argparse.Namespace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([command, "simclr_digit"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, "one line"
    assert err.startswith(f"hookbus {command}: error: config file not found: 'simclr_digit'")
    assert "is neither a file nor a recipe name; did you mean simclr_digits" in err
    assert "(hookbus recipes lists them)" in err
    assert ran == []


def test_a_missing_path_suggests_the_recipe_of_its_stem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"did you mean moco_digits\b"):
        resolve_recipe(str(tmp_path / "configs" / "moco_digits.yaml"))
    with pytest.raises(ConfigError, match="hookbus recipes lists the recipe names$"):
        resolve_recipe("zzzz")


def test_the_launcher_gets_the_resolved_path(
    ran: list[argparse.Namespace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[list[str]] = []
    monkeypatch.setattr(hookbus.cli, "launch_local", lambda argv, n: launched.append(argv) or 0)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "simclr_digits", "distributed.nproc_per_node=2", "-q"]) == 0
    ((command, config, *rest),) = launched
    assert command == "train" and Path(config).is_absolute() and Path(config).samefile(SHIPPED)
    assert rest == ["distributed.nproc_per_node=2", "-q"]
    assert ran == []


def test_recipes_lists_every_recipe_with_its_method_backbone_and_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["recipes"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["recipe", "method", "(loss.name)", "backbone", "data"]
    rows = {line.split()[0]: re.split(r"\s{2,}", line) for line in lines}
    assert list(rows) == [path.stem for path in CONFIGS]
    starts = {len(line) - len(line[len(line.split()[0]) :].lstrip()) for line in lines}
    assert len(starts) == 1, "the method column is aligned"
    for path in CONFIGS:
        raw = yaml.safe_load(path.read_text())
        _, method, backbone, data = rows[path.stem]
        assert method.split()[0] == raw["loss"]["name"]
        assert backbone.startswith(raw["model"]["backbone"]["name"])
        assert data.startswith(raw["data"]["name"])
    assert rows["linear_eval_digits"][1] == "cross_entropy (linear eval)"
    assert rows["simclr_digits"][2:] == ["small_cnn, width 32", "digits"]


@pytest.mark.parametrize("name", ["simclr_digits", "dino_imagefolder_resnet50.yaml"])
def test_show_prints_the_file_exactly(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", "--show", name]) == 0
    assert capsys.readouterr().out == (ROOT / "configs" / name).with_suffix(".yaml").read_text()


def test_show_with_a_typo_exits_2_naming_the_close_recipes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["recipes", "--show", "byol_digit"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("hookbus recipes: error: no recipe named 'byol_digit'; ")
    assert "did you mean byol_digits" in captured.err


@pytest.mark.slow
def test_recipes_loads_no_torch() -> None:
    script = (
        "import contextlib, io, sys; from hookbus.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): assert main(['recipes']) == 0\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "False"

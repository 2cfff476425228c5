"""``hookbus --help`` per command, ``hookbus schema`` against the recipes, the hook plan."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from hookbus import Config
from hookbus.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "configs").glob("*.yaml"))


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """The parser's commands, as argparse holds them (a command added anywhere shows up)."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_command_help_has_examples_of_itself(command: str) -> None:
    text = subcommands()[command].format_help()
    examples = text.split("examples:\n", 1)[1]
    assert f"  hookbus {command} " in examples
    assert "-q, --quiet" in text


def test_top_level_help_lists_every_command_and_the_exit_statuses() -> None:
    text = build_parser().format_help()
    assert set(subcommands()) == set(COMMANDS)
    for command in COMMANDS:
        assert f"  hookbus {command} " in text
    assert "75 preempted" in text


@pytest.fixture(scope="module")
def schema() -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    return json.loads(out.getvalue())


def test_schema_names_its_dialect_and_every_section(schema: dict) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == set(Config.model_fields)
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("recipe", RECIPES, ids=[path.name for path in RECIPES])
def test_every_shipped_recipe_passes_the_schema(schema: dict, recipe: Path) -> None:
    errors = list(Draft202012Validator(schema).iter_errors(yaml.safe_load(recipe.read_text())))
    assert [error.message for error in errors] == []


def test_schema_flags_a_typo_and_a_wrong_type_as_an_editor_would(schema: dict) -> None:
    validator = Draft202012Validator(schema)
    typo = {"optimizer": {"lrr": 0.1}}
    wrong = {"optimizer": {"name": "adam"}, "trainer": {"seed": "zero"}}
    messages = [error.message for error in validator.iter_errors(typo)]
    assert len(messages) == 1 and "'lrr' was unexpected" in messages[0]
    assert len(list(validator.iter_errors(wrong))) == 2


def test_hook_plan_ends_with_the_hook_count_and_the_checkpointed_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["hooks", str(ROOT / "configs" / "simclr_digits.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["on_start", "on_phase_start", "on_forward"]
    assert "summary_plot (REPORT)" in next(line for line in lines if line.startswith("on_end"))
    assert re.fullmatch(r"\d+ hooks; lower priorities run first; checkpoints carry .*", lines[-1])
    assert "summary_plot" in lines[-1].split("state of: ")[1]


def test_quickstart_shows_the_demo_recipes_hook_plan_as_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["hooks", str(ROOT / "configs" / "simclr_digits.yaml")]) == 0
    printed = capsys.readouterr().out.strip()
    assert f"```text\n{printed}\n```" in (ROOT / "docs" / "quickstart.md").read_text()

"""YAML that cannot hurt: alias bombs, deep nesting and duplicate keys are refused in one
line, quickly, and legitimate anchors still work."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hookbus import ConfigError, load_config
from hookbus.engine.config.yaml_safety import MAX_BYTES, MAX_DEPTH, load_yaml

BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]"
            for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def test_an_alias_bomb_is_refused_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match="expands to over 100000 values"):
        load_yaml(BOMB, "bomb.yaml")
    assert time.monotonic() - started < 2


@pytest.mark.slow
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_deep_nesting_is_refused(depth: int) -> None:
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_yaml("a: " + "[" * depth + "]" * depth, "deep.yaml")


def test_a_key_given_twice_is_refused_with_both_lines() -> None:
    text = "optimizer:\n  lr: 0.1\ndata:\n  batch_size: 8\noptimizer:\n  lr: 0.2\n"
    with pytest.raises(ConfigError, match=r"key 'optimizer' is given twice .*lines 1 and 5"):
        load_yaml(text, "dup.yaml")


def test_a_key_given_twice_in_a_nested_mapping_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"key 'lr' is given twice .*lines 2 and 3"):
        load_yaml("optimizer:\n  lr: 0.1\n  lr: 0.2\n", "dup.yaml")


def test_anchors_and_merge_keys_still_work() -> None:
    text = "base: &base {lr: 0.1, weight_decay: 0.0}\noptimizer:\n  <<: *base\n  lr: 0.3\n"
    assert load_yaml(text, "ok.yaml")["optimizer"] == {"lr": 0.3, "weight_decay": 0.0}


def test_an_oversized_text_is_refused() -> None:
    with pytest.raises(ConfigError, match="over 1024 KiB"):
        load_yaml("a: " + "x" * MAX_BYTES, "big.yaml")


def test_python_tags_are_refused_as_invalid_yaml() -> None:
    with pytest.raises(ConfigError, match="could not determine a constructor"):
        load_yaml("a: !!python/object/apply:os.system ['true']", "tag.yaml")


def test_a_bomb_in_a_recipe_or_an_override_is_a_config_error(tmp_path: Path) -> None:
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(BOMB)
    with pytest.raises(ConfigError, match=r"bomb.yaml: the YAML expands"):
        load_config(recipe)
    with pytest.raises(ConfigError, match=r"override 'trainer.imports=\[\[\[\[.*nested deeper"):
        load_config(None, ["trainer.imports=" + "[" * 500 + "]" * 500])


def test_an_error_quotes_a_short_excerpt_of_a_long_value() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(None, ["optimizer.lr=" + "9" * 5000 + "x"])
    assert len(str(error.value)) < 400

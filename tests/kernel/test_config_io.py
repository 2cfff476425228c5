"""Reading recipes: safe YAML, typed overrides, and errors that name the key or file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus import ConfigError, load_config

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "simclr_digits.yaml"


def test_shipped_recipe_validates() -> None:
    cfg = load_config(RECIPE)
    assert cfg.loss.name == "nt_xent"
    assert cfg.optimizer.num_epochs == 40


def test_overrides_are_typed_as_yaml_scalars() -> None:
    cfg = load_config(
        RECIPE, ["optimizer.lr=0.3", "trainer.imports=[os.path]", "data.pin_memory=true"]
    )
    assert cfg.optimizer.lr == 0.3
    assert cfg.trainer.imports == ["os.path"]
    assert cfg.data.pin_memory is True


def test_no_path_means_defaults() -> None:
    assert load_config(None).trainer.train_step_name == "standard_train_step"


def test_unknown_key_names_its_path_and_the_allowed_keys() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'optimizer.lrr' \(allowed: name, lr"):
        load_config(RECIPE, ["optimizer.lrr=1"])


def test_wrong_type_names_the_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"optimizer.num_epochs: .*got 'many'"):
        load_config(RECIPE, ["optimizer.num_epochs=many"])


def test_a_check_across_sections_starts_with_the_key_it_names() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(RECIPE, ["model.mae_decoder.depth=2"])
    assert str(error.value).startswith(
        f"invalid config ({RECIPE}): model.mae_decoder.depth: the MAE decoder is built only "
        "for loss.name mae, not nt_xent"
    )


def test_a_check_within_a_section_names_the_section() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(RECIPE, ["model.prototypes.weight_norm=true"])
    assert f"invalid config ({RECIPE}): model.prototypes: model.prototypes.weight_norm" in str(
        error.value
    )


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found: .*absent.yaml"):
        load_config(tmp_path / "absent.yaml")


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("trainer:\n  seed: [1, 2\n")
    with pytest.raises(ConfigError, match=r"invalid YAML in .*bad.yaml: .* line 3"):
        load_config(path)


def test_yaml_python_tags_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("trainer: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path)


def test_override_without_equals_is_refused() -> None:
    with pytest.raises(ConfigError, match="must look like section.key=value"):
        load_config(None, ["optimizer.lr"])


def test_override_into_a_scalar_is_refused() -> None:
    with pytest.raises(ConfigError, match="optimizer is not a section"):
        load_config(None, ["optimizer=1", "optimizer.lr=2"])


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)

"""An SSL method is one declared unit: its entry in ``hookbus.methods`` states its loss,
model parts, views, settings and hooks; validation, ``default_hooks`` and the docs read it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus import default_hooks
from hookbus.config import Config, validate_config
from hookbus.engine.bus.hook_registry import HOOKS
from hookbus.engine.errors import ConfigError
from hookbus.engine.methods.entries import (
    METHODS,
    MethodHook,
    MethodSpec,
    Views,
    default_method,
    methods_in_order,
    readers,
    section_readers,
)
from hookbus.hook_set import method_hooks
from hookbus.methods import METHOD_ENTRIES, loss_names
from hookbus.parts.losses.build import LOSSES

ROOT = Path(__file__).resolve().parents[2]
METHOD_NAMES = re.compile(
    r"simclr|moco|byol|swav|dino|barlow|vicreg|simsiam|nnclr|mae|nt_xent", re.IGNORECASE
)
ENTRIES = [spec.name for spec in methods_in_order()]
PART_ON = {"predictor": {"dims": [8, 8]}, "prototypes": {"count": 8}}


def config(**sections: Any) -> Config:
    return validate_config(sections)


def refusal(**sections: Any) -> str:
    with pytest.raises(ConfigError) as error:
        config(**sections)
    return str(error.value)


class _Prose(ast.NodeTransformer):
    """Blanks the prose of a module: its string statements (docstrings) and the
    ``description=`` texts of its config fields."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return ast.Pass()
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg == "description":
            node.value = ast.Constant("")
        return self.generic_visit(node)


def code_without_prose(path: Path) -> str:
    """The module's code without its docstrings and the ``description=`` texts of its
    config fields: the prose of the configuration reference, which may cite the method a
    choice comes from. What remains is what the kernel does."""
    return ast.unparse(_Prose().visit(ast.parse(path.read_text())))


def test_the_kernel_names_no_method() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in sorted((ROOT / "engine").rglob("*.py"))
        for match in METHOD_NAMES.finditer(code_without_prose(path))
    ]
    assert found == []


def test_the_prose_check_still_sees_code() -> None:
    path = ROOT / "engine" / "methods" / "entries.py"
    assert "def check_method" in code_without_prose(path)
    assert "A method entry" not in code_without_prose(path)


def test_hookbus_ships_seventeen_methods_in_the_docs_order() -> None:
    assert ENTRIES == [
        "nt_xent",
        "moco",
        "moco_v3",
        "byol",
        "swav",
        "dino",
        "dinov2",
        "dinov3",
        "ibot",
        "barlow_twins",
        "vicreg",
        "simsiam",
        "nnclr",
        "mae",
        "ijepa",
        "lejepa",
        "distillation",
    ]
    assert default_method().name == "nt_xent" == Config().loss.name


@pytest.mark.parametrize("name", ENTRIES)
def test_an_entry_names_a_registered_loss_and_registered_hooks(name: str) -> None:
    spec = METHODS.get(name)
    assert name in LOSSES
    assert all(use.name in HOOKS for use in spec.hooks)


@pytest.mark.parametrize("name", ENTRIES)
def test_an_entrys_loss_reads_exactly_its_shared_parts(name: str) -> None:
    spec = METHODS.get(name)
    assert set(LOSSES.reads(name)) == set(spec.parts) & set(PART_ON)


@pytest.mark.parametrize("name", readers("predictor"))
def test_a_method_reading_the_predictor_needs_one(name: str) -> None:
    message = refusal(loss={"name": name})
    assert message.endswith(f"loss.name {name} needs a predictor: set model.predictor.dims")


@pytest.mark.parametrize("name", readers("prototypes"))
def test_a_method_reading_prototypes_needs_them(name: str) -> None:
    message = refusal(loss={"name": name})
    assert message.endswith(f"loss.name {name} needs prototypes: set model.prototypes.count")


def test_the_predictor_and_prototype_readers_are_the_known_ones() -> None:
    assert readers("predictor") == ["byol", "moco_v3", "nnclr", "simsiam"]
    assert readers("prototypes") == ["dino", "dinov2", "dinov3", "ibot", "swav"]


@pytest.mark.parametrize("name", [n for n in ENTRIES if METHODS.get(n).views.minimum == 2])
def test_a_method_that_compares_views_refuses_one_view(name: str) -> None:
    model = {part: PART_ON[part] for part in METHODS.get(name).parts}
    message = refusal(loss={"name": name}, model=model, data={"num_views": 1})
    assert message.endswith(
        f"loss.name {name} compares views of each image: data.num_views must be at least 2 (got 1)"
    )


def test_a_one_view_method_refuses_a_second_view_and_small_views() -> None:
    mae = {"loss": {"name": "mae"}, "model": {"backbone": {"name": "vit_tiny"}}}
    expected = "loss.name mae reconstructs one masked view of each image: set data.num_views=1"
    assert expected in refusal(**mae, data={"num_views": 2})
    assert "(got 1 and 2)" in refusal(**mae, data={"num_views": 1, "small_views": {"count": 2}})
    config(**mae, data={"num_views": 1})


def test_a_loss_without_an_entry_is_held_to_two_views() -> None:
    message = refusal(loss={"name": "my_loss"}, data={"num_views": 1})
    assert "loss.name my_loss compares views of each image" in message


def test_a_model_section_of_one_method_is_refused_for_another() -> None:
    message = refusal(loss={"name": "moco"}, model={"mae_decoder": {"heads": 4}})
    assert message.endswith(
        "model.mae_decoder.heads: the MAE decoder is built only for loss.name mae, not moco; "
        "remove it"
    )


def test_an_unknown_part_is_refused_when_an_entry_is_declared() -> None:
    with pytest.raises(ValueError, match="unknown model parts decoder"):
        MethodSpec(name="odd", title="Odd", parts=("decoder",))


def test_the_whole_config_declares_each_methods_settings() -> None:
    from hookbus.parts.config import LOSS_NAMES
    from hookbus.parts.settings.mae import MaeDecoderConfig
    from hookbus.parts.settings.moco import MocoConfig

    assert Config().loss.moco.queue_size == MocoConfig().queue_size == 1024
    assert Config().model.mae_decoder == MaeDecoderConfig()
    assert loss_names() == LOSS_NAMES
    assert Config().loss.name == default_method().name
    for spec in METHOD_ENTRIES:
        if spec.section is not None:
            assert (
                Config.model_fields["loss"].annotation.model_fields[spec.name].annotation
                is spec.section
            )
        if spec.model_section is not None:
            own = spec.model_section
            assert (
                Config.model_fields["model"].annotation.model_fields[own.key].annotation
                is own.section
            )


@pytest.mark.parametrize(
    ("sections", "hooks"),
    [
        ({"loss": {"name": "moco"}}, ["momentum_teacher", "key_queue"]),
        ({"loss": {"name": "simsiam"}, "model": {"predictor": PART_ON["predictor"]}}, []),
        ({"loss": {"name": "swav"}, "model": {"prototypes": PART_ON["prototypes"]}}, None),
        (
            {
                "loss": {"name": "swav", "swav": {"queue_size": 4}},
                "model": {"prototypes": PART_ON["prototypes"]},
            },
            ["prototype_normalization", "freeze_prototypes", "swav_queue"],
        ),
    ],
)
def test_method_hooks_are_the_entrys_in_order_when_their_condition_holds(
    sections: dict[str, Any], hooks: list[str] | None
) -> None:
    expected = hooks if hooks is not None else ["prototype_normalization", "freeze_prototypes"]
    assert [hook.name for hook in method_hooks(config(**sections))] == expected


def test_a_method_hook_is_built_with_the_parameters_its_entry_reads() -> None:
    cfg = config(
        loss={"name": "dino", "dino": {"global_views": 1}},
        model={"prototypes": PART_ON["prototypes"]},
        data={"num_views": 2},
    )
    teacher, centering, freeze = method_hooks(cfg)
    assert (teacher.views, teacher.shuffle_bn) == (1, False)
    assert centering.center_momentum == 0.9
    assert (freeze.epochs, freeze.iterations) == (1, 0)


def test_a_registered_method_adds_its_hooks_to_the_default_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = MethodSpec(
        name="nt_xent_twice",
        title="Test",
        hooks=(MethodHook("key_queue", lambda cfg: {"size": 3}),),
    )
    monkeypatch.setitem(METHODS._entries, spec.name, spec)
    cfg = config(loss={"name": spec.name})
    names = [hook.name for hook in default_hooks(cfg)]
    assert names[:3] == ["timing", "meter_sync", "key_queue"]


VIT_PROTOTYPES = {"backbone": {"name": "vit_tiny"}, "prototypes": PART_ON["prototypes"]}


def test_a_section_is_read_by_its_method_and_the_methods_that_list_it() -> None:
    assert section_readers("dino") == ["dino", "dinov2", "dinov3", "ibot"]
    assert section_readers("ibot") == ["dinov2", "dinov3", "ibot"]
    assert section_readers("dinov2") == ["dinov2", "dinov3"]
    assert section_readers("dinov3") == ["dinov3"]
    assert section_readers("moco") == ["moco"]


@pytest.mark.parametrize(
    ("name", "loss"),
    [
        ("dinov2", {"dino": {"freeze_last_layer_epochs": 0}, "ibot": {"loss_weight": 2.0}}),
        ("ibot", {"dino": {"global_views": 1}, "ibot": {"mask_probability": 1.0}}),
        ("dinov3", {"dinov2": {"koleo_weight": 0.0}, "dinov3": {"gram_start": 3}}),
    ],
)
def test_a_method_sets_the_sections_it_reads(name: str, loss: dict[str, Any]) -> None:
    cfg = config(loss={"name": name, **loss}, model=VIT_PROTOTYPES)
    assert cfg.loss.name == name


@pytest.mark.parametrize(
    ("name", "loss", "expected"),
    [
        (
            "swav",
            {"ibot": {"loss_weight": 2.0}},
            "loss.ibot.loss_weight is read by loss.name dinov2, dinov3 and ibot only, not swav; "
            "remove it",
        ),
        (
            "ibot",
            {"dinov2": {"koleo_weight": 0.0}},
            "loss.dinov2.koleo_weight is read by loss.name dinov2 and dinov3 only, not ibot; "
            "remove it",
        ),
        (
            "my_loss",
            {"dinov2": {"sinkhorn_iterations": 5}},
            "loss.dinov2.sinkhorn_iterations "
            "is read by loss.name dinov2 and dinov3 only, not my_loss; remove it",
        ),
    ],
)
def test_an_exclusive_section_is_refused_under_a_method_that_does_not_read_it(
    name: str, loss: dict[str, Any], expected: str
) -> None:
    message = refusal(loss={"name": name, **loss}, model=VIT_PROTOTYPES)
    assert message.endswith(expected)


def test_a_section_not_marked_exclusive_is_left_to_any_method() -> None:
    cfg = config(loss={"name": "nt_xent", "moco": {"queue_size": 8}})
    assert cfg.loss.moco.queue_size == 8


def test_views_refuse_more_than_their_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = MethodSpec(name="two_views_only", title="Test", views=Views(2, 2))
    monkeypatch.setitem(METHODS._entries, spec.name, spec)
    message = refusal(loss={"name": spec.name}, data={"num_views": 3})
    assert message.endswith("data.num_views must be at most 2 (got 3)")


def methods_table() -> dict[str, tuple[str, list[str], list[str]]]:
    """docs/methods.md's methods table: ``loss.name`` to (method, model keys, hooks)."""
    lines = (ROOT / "docs" / "methods.md").read_text().splitlines()
    start = lines.index(
        "| method | `loss.name` | model parts | hooks (`hooks/methods/`) | state in checkpoints |"
    )
    table = {}
    for row in lines[start + 2 :]:
        if not row.startswith("|"):
            break
        title, name, parts, hooks = [cell.strip() for cell in row.strip("|").split("|")][:4]
        keys = re.findall(r"`model\.(\w+)`", parts)
        table[name.strip("`")] = (title, keys, re.findall(r"`(\w+)`", hooks))
    return table


def test_the_methods_table_of_the_docs_is_the_registry() -> None:
    expected = {}
    for spec in methods_in_order():
        keys = [part for part in ("predictor", "prototypes") if part in spec.parts]
        keys += [spec.model_section.key] if spec.model_section else []
        hooks = [use.name for use in spec.hooks]
        expected[spec.name] = (spec.title, keys, hooks)
    table = methods_table()
    hook_names = {
        name: (title, keys, [h for h in hooks if h in HOOKS])
        for name, (title, keys, hooks) in table.items()
    }
    assert hook_names == expected


def test_the_config_package_imports_and_validates_a_method_without_torch() -> None:
    script = """
import importlib, pkgutil, sys
sys.modules["torch"] = None
import hookbus.engine.config
for module in pkgutil.iter_modules(hookbus.engine.config.__path__):
    importlib.import_module("hookbus.engine.config." + module.name)
from hookbus.config import validate_config
from hookbus.engine.errors import ConfigError
cfg = validate_config({"loss": {"name": "moco", "moco": {"queue_size": 8}}})
try:
    validate_config({"loss": {"name": "byol"}})
except ConfigError as error:
    needs = str(error).endswith("needs a predictor: set model.predictor.dims")
    print(cfg.loss.moco.queue_size, needs)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["8", "True"]


def test_every_module_of_the_config_package_is_short() -> None:
    lengths = {
        path.name: len(path.read_text().splitlines())
        for path in (ROOT / "engine" / "config").glob("*.py")
    }
    assert len(lengths) >= 13
    assert max(lengths.values()) <= 400, lengths


def test_every_name_the_config_module_had_still_imports_from_it() -> None:
    import hookbus.engine.config as config_package

    names = [
        "Section",
        "Size",
        "Positive",
        "Decay",
        "MAX_PIXELS",
        "MomentumSchedule",
        "TrainerConfig",
        "AugmentConfig",
        "SmallViewsConfig",
        "ViewAugmentConfig",
        "TorchvisionAugmentConfig",
        "ImageFolderConfig",
        "SyntheticDataConfig",
        "DataConfig",
        "CudaCacheConfig",
        "AmpConfig",
        "CompileConfig",
        "ViTConfig",
        "BackboneConfig",
        "HeadConfig",
        "PredictorConfig",
        "PrototypesConfig",
        "LinearEvalConfig",
        "FineTuneConfig",
        "ModelConfig",
        "CrossEntropyConfig",
        "LossConfig",
        "OptimizerConfig",
        "KnnMeterConfig",
        "AccuracyMeterConfig",
        "CollapseMeterConfig",
        "MetersConfig",
        "CheckpointConfig",
        "EnabledHook",
        "NanCheckConfig",
        "EvaluationReportConfig",
        "OnlineProbeConfig",
        "ExtraHookConfig",
        "WandbConfig",
        "MlflowConfig",
        "HooksConfig",
        "DistributedConfig",
        "MachineConfig",
        "FromPythonConfig",
        "Config",
    ]
    missing = [name for name in names if getattr(config_package, name, None) is None]
    assert missing == []


def test_each_methods_settings_import_from_its_settings_module_only() -> None:
    import hookbus.engine.config as config_package

    for spec in METHOD_ENTRIES:
        for section in (spec.section, spec.model_section and spec.model_section.section):
            if section is not None:
                assert section.__module__ == f"hookbus.parts.settings.{spec.name}"
                assert not hasattr(config_package, section.__name__)


def test_linear_evaluation_and_fine_tuning_share_their_classifier_settings() -> None:
    from hookbus.engine.config import FineTuneConfig, LinearEvalConfig

    shared = ["enabled", "num_classes", "feature_norm", "checkpoint"]
    assert list(LinearEvalConfig.model_fields) == shared
    assert list(FineTuneConfig.model_fields)[:4] == shared
    assert (LinearEvalConfig().feature_norm, FineTuneConfig().feature_norm) == (True, False)

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

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"engine": "hookbus.engine", "parts": "hookbus.parts", "hooks": "hookbus.hooks"}
FOLDERS |= {"steps": "hookbus.steps", "hookbus": "hookbus"}
FLOOR = {"hookbus.engine": 0, "hookbus.parts": 1, "hookbus.hooks": 2, "hookbus.steps": 2}
SHIPPED = {"configs": "hookbus.recipes", "examples": "hookbus.examples"}
"""Folders installed beside the library, outside its floors: the recipes (YAML as package
data) and the tutorials' examples, which use the public face like a user's code."""
KERNEL_ROOMS = ("methods", "config", "bus", "process", "checkpoint")
"""The kernel's rooms (sub-packages of ``hookbus.engine``), lowest first: a room imports
only its own modules, those of the rooms before it and the base (the modules of
``hookbus.engine`` itself: errors, bounded reads, registries, the section base)."""
TORCHVISION_ON_USE = (
    "a torchvision-based backbone or image-file pipeline: its module imports torchvision "
    "(about a second), loaded only when it is named or built, never by a small-CNN run "
    "on tensors"
)
SHARDS_ON_USE = (
    "the streaming library, the optional extra shards: loaded only by data.name shards "
    "and hookbus shard, after a check that names the extra when it is missing"
)
MODEL_LISTS = (
    "hookbus models lists the backbone registries, timm's and torchvision's names only when "
    "asked (timm loads torchvision: seconds)"
)
TEACHER = "a distillation run's teacher (its weights file, its backbone), only when one is named"
PRETRAINED_TAG = (
    "the hub's and torch's download caches, only when a backbone names a pretrained tag"
)
LAZY_IMPORTS: dict[tuple[str, str], str] = {
    ("hookbus.cli", "hookbus.commands"): (
        "the command line loads the commands module (torch, ignite, the trainer: about 5 s) only "
        "when a command runs in this process, never for --help or the local launcher's parent"
    ),
    ("hookbus.cli", "hookbus.compose"): (
        "the composition of a run loads torch and the backbone registry (seconds), which "
        "--help, a bad argument and the commands that read no config never need"
    ),
    ("hookbus.commands", "hookbus.embed"): (
        "hookbus embed's module imports torchvision's transforms (about a second), which "
        "the other commands of a run on tensors never need"
    ),
    ("hookbus.commands", "hookbus.eval"): (
        "hookbus eval's module imports the ViT backbones (torchvision, about a second), which "
        "the other commands of a run on tensors never need"
    ),
    ("hookbus.cli", "hookbus.models_list"): (
        "hookbus models reads timm's and torchvision's model lists (seconds), which no other "
        "command needs"
    ),
    ("hookbus.models_list", "hookbus.parts.models"): MODEL_LISTS,
    ("hookbus.models_list", "hookbus.parts.models.timm_any"): MODEL_LISTS,
    ("hookbus.models_list", "hookbus.parts.models.torchvision_any"): MODEL_LISTS,
    ("hookbus.hooks.methods.distillation_teacher", "hookbus.parts.models.distillation"): TEACHER,
    ("hookbus.hooks.methods.distillation_teacher", "hookbus.parts.models.weights_file"): TEACHER,
    ("hookbus.parts.models.distillation", "hookbus.parts.models.build"): (
        "the backbone builders import the weights loading, which builds on this module's "
        "teacher: imported when a teacher is built"
    ),
    ("hookbus.parts.models.distillation", "hookbus.parts.models.pretrained"): (
        "the weights loading, only when a teacher is built"
    ),
    ("hookbus.parts.models.timm_pretrained", "huggingface_hub"): PRETRAINED_TAG,
    ("hookbus.parts.models.timm_pretrained", "torch"): PRETRAINED_TAG,
    ("hookbus.parts.models.weights_file", "safetensors"): (
        "the safetensors reader, only for a .safetensors weights file"
    ),
    ("hookbus.commands", "hookbus.parts.data.datasets"): SHARDS_ON_USE,
    ("hookbus.engine.process.launch_env", "hookbus.engine.process.slurm_env"): (
        "the SLURM reading builds on this module's launch environment, so it is imported "
        "where a run has no torchrun variables, after both modules exist"
    ),
    ("hookbus.eval", "hookbus.pictures"): (
        "matplotlib, scikit-learn's t-SNE and tensorboardX's projector (seconds), only for "
        "hookbus eval --pictures"
    ),
    ("hookbus.commands", "hookbus.shard"): SHARDS_ON_USE,
    ("hookbus.parts.data.datasets", "hookbus.parts.data.shards"): SHARDS_ON_USE,
    ("hookbus.export", "hookbus.parts.models.layer_scale"): TORCHVISION_ON_USE,
    ("hookbus.parts.meters.frozen_eval", "sklearn"): "scikit-learn's probe, only for the report",
    ("hookbus.hooks.mlflow_tracker", "mlflow"): "about a second, only for runs logging to it",
    ("hookbus.engine.checkpoint.run_curves", "matplotlib"): "only when a figure is drawn",
    ("hookbus.hooks.wandb_tracker", "wandb"): "about half a second, only for runs logging to it",
    ("hookbus.parts.data.digits", "sklearn"): "scikit-learn's digits, only for that data set",
    ("hookbus.parts.data.build", "hookbus.parts.data.crop_collate"): TORCHVISION_ON_USE,
    ("hookbus.parts.data.image_decode", "torchvision"): (
        "torchvision's JPEG decoder, loaded at the first JPEG decoded: a run on tensors never "
        "needs it"
    ),
    ("hookbus.parts.data.build", "hookbus.parts.data.transforms"): TORCHVISION_ON_USE,
    ("hookbus.parts.models.build", "hookbus.parts.models.resnet"): TORCHVISION_ON_USE,
    ("hookbus.parts.models.build", "hookbus.parts.models.torchvision_any"): TORCHVISION_ON_USE,
    ("hookbus.parts.models.build", "hookbus.parts.models.vit"): TORCHVISION_ON_USE,
    ("hookbus.parts.models.timm_any", "timm"): (
        "timm is an optional extra (it loads torchvision): imported when a timm:<name> "
        "backbone is named or built, and a missing timm is a config error naming the extra"
    ),
    ("hookbus.methods.ibot", "hookbus.parts.models.timm_masked"): (
        "the patch size of a timm:<name> ViT (built by timm on the meta device: seconds), only "
        "when iBOT, DINOv2 or DINOv3 names one; the models' package imports the config, whose "
        "validation runs this check"
    ),
    ("hookbus.methods.mae", "hookbus.parts.models.timm_any"): (
        "the patch size of a timm:<name> ViT (built by timm on the meta device), only when "
        "MAE names one; the models' package imports the config, whose validation runs this "
        "check"
    ),
    ("hookbus.methods.dinov3", "hookbus.parts.models.presets"): (
        "the patch size of a vit_* preset, only when DINOv3's adaptation phase is checked; "
        "the models' package imports the config, whose validation runs this check"
    ),
    ("hookbus.methods.dinov3", "hookbus.parts.models.timm_masked"): (
        "the patch size of a timm:<name> ViT (built by timm on the meta device), only when "
        "DINOv3's adaptation phase is checked on one"
    ),
    ("hookbus.parts.models.timm_masked", "timm"): (
        "timm is an optional extra: its ViT classes and layer grouping, imported when a "
        "masked method's model is built on a timm backbone"
    ),
    ("hookbus.parts.models.compiled", "torch"): (
        "torch._dynamo's backend list (seconds), only when model.compile is on"
    ),
    ("hookbus.parts.models.fine_tune", "torchvision"): (
        "the ViT check of layer decay: fine-tuning a small CNN never loads torchvision"
    ),
}
"""Every import inside a function, ``(module, imported)`` with its reason (never a
cycle): ``imported`` is a ``hookbus`` module, or the top-level package of another."""
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


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import below ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``hookbus`` import in the file."""
    imports = _imports(ast.parse(path.read_text()))
    return [(line, name) for line, name in imports if name.split(".")[0] == "hookbus"]


def test_every_library_module_is_in_a_listed_package() -> None:
    packages = {name for name, path in library_modules().items() if path.name == "__init__.py"}
    packages |= set(SHIPPED.values())
    setup = (ROOT / "setup.cfg").read_text()
    listed = set(re.search(r"packages =\n((?:    .+\n)+)", setup).group(1).split())
    assert packages == listed


@pytest.mark.parametrize("module", sorted(library_modules()))
def test_a_module_imports_only_its_own_floor_or_those_below(module: str) -> None:
    room, height = floor_of(module)
    for line, imported in imported_modules(library_modules()[module]):
        if imported == "hookbus":
            pytest.fail(f"{module}:{line} imports the public face `hookbus` from inside")
        other_room, other_height = floor_of(imported)
        assert other_height <= height, f"{module}:{line} imports {imported} from a floor above"
        if height == 2:
            assert other_room in (room, "hookbus.engine", "hookbus.parts"), (
                f"{module}:{line}: hooks and steps do not import each other ({imported})"
            )


def kernel_room(module: str) -> int:
    """The height of a kernel module's room: 0 for the base, then by :data:`KERNEL_ROOMS`."""
    parts = module.split(".")
    return KERNEL_ROOMS.index(parts[2]) + 1 if parts[2] in KERNEL_ROOMS else 0


def test_every_kernel_module_stands_in_a_room_or_the_base() -> None:
    folders = {path.parent.name for path in (ROOT / "engine").glob("*/__init__.py")}
    assert folders == set(KERNEL_ROOMS)
    base = sorted(path.stem for path in (ROOT / "engine").glob("*.py"))
    assert base == ["__init__", "bounded_files", "errors", "folder_walk", "registry", "section"]


def type_only_lines(path: Path) -> set[int]:
    """The lines of the file's ``if TYPE_CHECKING:`` blocks (imports for annotations)."""
    return {
        inner.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for statement in node.body
        for inner in ast.walk(statement)
        if hasattr(inner, "lineno")
    }


@pytest.mark.parametrize(
    "module", sorted(name for name in library_modules() if name.startswith("hookbus.engine."))
)
def test_a_kernel_room_imports_only_itself_and_the_rooms_below(module: str) -> None:
    """At run time: an import for annotations only may name a room above."""
    height = kernel_room(module)
    path = library_modules()[module]
    for line, imported in imported_modules(path):
        if imported.startswith("hookbus.engine.") and line not in type_only_lines(path):
            assert kernel_room(imported) <= height, (
                f"{module}:{line} imports {imported} from a room above"
            )


def function_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, imported)`` of every import inside a function of the file: a ``hookbus``
    module by its name, another package by its top-level name."""
    inner = {
        found
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for found in _imports(node)
    }
    return sorted(
        (line, name if name.startswith("hookbus") else name.split(".")[0]) for line, name in inner
    )


@pytest.mark.parametrize("module", sorted(library_modules()))
def test_no_import_hides_inside_a_function(module: str) -> None:
    inner = [
        f"line {line}: {name}"
        for line, name in function_imports(library_modules()[module])
        if (module, name) not in LAZY_IMPORTS
    ]
    assert inner == []


def test_every_listed_lazy_import_is_still_made() -> None:
    made = {
        (module, name)
        for module, path in library_modules().items()
        for _, name in function_imports(path)
    }
    assert set(LAZY_IMPORTS) <= made, set(LAZY_IMPORTS) - made


@pytest.mark.slow
def test_a_small_cnn_run_and_an_export_load_no_torchvision(tmp_path: Path) -> None:
    script = f"""
import sys
from hookbus.cli import main
run = {str(tmp_path / "run")!r}
assert main(["train", "simclr_digits", "data.name=synthetic", "data.synthetic.train_size=32",
    "data.synthetic.test_size=16", "data.synthetic.channels=1", "data.batch_size=16",
    "optimizer.num_epochs=1",
    "optimizer.warmup_epochs=0", "meters.knn.k=3", "hooks.progress_bar.enabled=false",
    "hooks.evaluation_report.enabled=false", "hooks.summary_plot.enabled=false",
    "checkpoint.dir=" + run]) == 0
assert main(["export", run + "/checkpoint.torch", run + "/backbone.pt"]) == 0
print("torchvision" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


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


@pytest.mark.slow
def test_importing_the_kernel_loads_neither_torch_models_nor_the_trainer() -> None:
    script = """
import importlib, pkgutil, sys
import hookbus.engine.errors
assert "torch" not in sys.modules, "the errors module alone needs no torch"
import hookbus.engine
for module in pkgutil.walk_packages(hookbus.engine.__path__, "hookbus.engine."):
    importlib.import_module(module.name)
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


@pytest.mark.slow
def test_the_command_line_starts_without_torch() -> None:
    script = "import sys, hookbus.cli; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "False"


def parts_room(module: str) -> str | None:
    """The room of ``hookbus.parts`` a module stands in (``data``, ``models``, ...), or
    None for the modules at the top of parts (``task``) and those outside it."""
    names = module.split(".")
    if names[:2] != ["hookbus", "parts"] or len(names) < 3:
        return None
    return names[2] if (ROOT / "parts" / names[2]).is_dir() else None


def test_no_two_rooms_of_the_parts_import_each_other() -> None:
    arrows = {
        (room, other)
        for module, path in library_modules().items()
        if (room := parts_room(module)) is not None
        for _, imported in imported_modules(path)
        if (other := parts_room(imported)) is not None and other != room
    }
    assert ("data", "models") in arrows
    assert sorted((a, b) for a, b in arrows if (b, a) in arrows) == []

"""The Python API page (docs/reference/api.md) documents every public name."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import hookbus
import hookbus.testing
from hookbus.reference.api_sources import lay_out, package_dirs

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "reference" / "api.md").read_text()
DOCUMENTED = set(re.findall(r"^::: (\S+)", PAGE, flags=re.M))
REGISTRIES = {"HOOKS", "TRAIN_STEPS", "DATASETS", "LOSSES", "METERS", "BACKBONES"}
"""Registry instances: the page documents their classes and says which is which."""


def defining_path(module: str, name: str) -> str:
    value = getattr(importlib.import_module(module), name)
    return f"{getattr(value, '__module__', module)}.{name}"


def documented_object(path: str) -> object:
    """What a ``::: path`` line of the page documents: the object at ``path`` (a name
    may be documented where users import it, e.g. a package that re-exports it)."""
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return importlib.import_module(path)


def test_every_name_hookbus_exports_is_on_the_page() -> None:
    on_page = [documented_object(path) for path in DOCUMENTED]
    missing = [
        name
        for name in hookbus.__all__
        if name not in REGISTRIES
        and defining_path("hookbus", name) not in DOCUMENTED
        and not any(getattr(hookbus, name) is value for value in on_page)
    ]
    assert missing == []


def test_the_registries_are_named_and_their_classes_documented() -> None:
    assert all(f"`{name}`" in PAGE for name in REGISTRIES)
    for name in REGISTRIES:
        registry_class = type(getattr(hookbus, name))
        assert f"{registry_class.__module__}.{registry_class.__qualname__}" in DOCUMENTED


def test_the_test_kit_is_on_the_page() -> None:
    for name in hookbus.testing.__all__:
        assert defining_path("hookbus.testing", name) in DOCUMENTED or (
            f"hookbus.testing.{name}" in DOCUMENTED
        ), name


def test_the_sources_are_laid_out_as_the_wheel_installs_them(tmp_path: Path) -> None:
    lay_out(ROOT, tmp_path)
    package = tmp_path / "hookbus"
    for name, folder in package_dirs(ROOT / "setup.cfg").items():
        installed = package.joinpath(*name.split(".")[1:])
        assert (installed / "__init__.py").resolve() == (ROOT / folder / "__init__.py").resolve()
    assert (package / "engine" / "bus" / "testing.py").is_file()
    assert (package / "parts" / "models" / "build.py").is_file()

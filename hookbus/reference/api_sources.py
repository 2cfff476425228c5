"""A MkDocs hook: the package's source tree as installed, for the API page's reader.

setup.cfg maps ``hookbus.engine`` to ``engine/``, ``hookbus.hooks`` to ``hooks/`` and so
on (``package_dir``), and an editable install keeps that mapping in an import hook, which
a reader of source files (griffe, under mkdocstrings) does not follow. Before each build,
:func:`on_startup` lays out ``build/api-sources/hookbus`` as the wheel installs it, of
links to the checkout's files, and mkdocs.yml points mkdocstrings there (``paths``).
Nothing is imported: the API page is read from the source, module attributes' docstrings
included.
"""

from __future__ import annotations

import configparser
import shutil
from pathlib import Path

SOURCES = Path("build") / "api-sources"
"""Where the installed layout is laid out, in the checkout (mkdocs.yml's ``paths``)."""


def package_dirs(setup_cfg: Path) -> dict[str, str]:
    """``{package: folder}`` of setup.cfg's ``[options] package_dir``."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    lines = parser["options"]["package_dir"].strip().splitlines()
    pairs = (line.split("=", 1) for line in lines)
    return {package.strip(): folder.strip() for package, folder in pairs}


def lay_out(root: Path, target: Path) -> None:
    """``target/hookbus``: links to the files of the ``hookbus`` folder, and for each
    mapped subpackage (``hookbus.engine = engine``) a link named after it to its folder."""
    shutil.rmtree(target, ignore_errors=True)
    mapping = package_dirs(root / "setup.cfg")
    package = target / "hookbus"
    package.mkdir(parents=True)
    for entry in (root / mapping.pop("hookbus")).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry.resolve())
    for name, folder in mapping.items():
        link = package.joinpath(*name.split(".")[1:])
        if not link.exists():
            link.symlink_to((root / folder).resolve(), target_is_directory=True)


def on_startup(command: str, dirty: bool) -> None:
    """MkDocs' first event, before mkdocstrings reads its ``paths``: lay the sources out
    in the checkout this file belongs to."""
    root = Path(__file__).resolve().parents[2]
    lay_out(root, root / SOURCES)

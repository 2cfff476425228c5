"""MkDocs hook: drop the nav entries of optional pages whose file does not exist.

Other work streams write some pages (``extra.optional_pages`` in mkdocs.yml); until a
page exists its nav entry is left out, so ``mkdocs build --strict`` passes either way.
Every other nav entry must exist: a missing one still fails the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def prune_nav(nav: list[Any], optional: set[str], docs_dir: Path) -> list[Any]:
    """``nav`` without the optional pages missing from ``docs_dir``, nor emptied sections."""
    kept: list[Any] = []
    for item in nav:
        title, target = next(iter(item.items())) if isinstance(item, dict) else (None, item)
        if isinstance(target, list):
            target = prune_nav(target, optional, docs_dir)
            if not target:
                continue
        elif target in optional and not (docs_dir / target).is_file():
            continue
        kept.append({title: target} if title is not None else target)
    return kept


def on_config(config: Any) -> Any:
    """Prune ``config.nav`` before MkDocs reads the pages."""
    optional = set(config.extra.get("optional_pages", []))
    config.nav = prune_nav(config.nav, optional, Path(config.docs_dir))
    return config

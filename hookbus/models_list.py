"""``hookbus models``: the backbones ``model.backbone.name`` (and ``--model``) can name.

Three sources, each under a heading that says how its names are spelled: hookbus's own
backbones (with the first line of what each is), torchvision's classification models
(``tv:NAME``, also ``torchvision/NAME``) and timm's models (``timm:NAME``, also
``timm/NAME``; with ``--pretrained``, timm's pretrained weights ``timm:NAME.TAG``). A
pattern (``fnmatch``: ``'*dinov2*'``) keeps the names that match it; a missing timm is
said in the timm section, not an error.
"""

from __future__ import annotations

import fnmatch

from hookbus.engine.config.model_names import TIMM_PREFIX, TV_PREFIX


def _matching(names: list[str] | tuple[str, ...], pattern: str | None) -> list[str]:
    return [name for name in names if pattern is None or fnmatch.fnmatchcase(name, pattern)]


def _summary(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    text = " ".join(line.strip() for line in lines[: lines.index("") if "" in lines else 2])
    return text.split(". ")[0].split(", see ")[0].rstrip(".")


def own_backbones(pattern: str | None = None) -> list[tuple[str, str]]:
    """hookbus's registered backbones matching ``pattern``, each with what it is."""
    from hookbus.parts.models import BACKBONES

    return [
        (name, _summary(BACKBONES.get(name).__doc__))
        for name in _matching(BACKBONES.names(), pattern)
    ]


def model_lines(pattern: str | None = None, *, pretrained: bool = False) -> list[str]:
    """The lines ``hookbus models`` prints: a heading per source, then its names."""
    from hookbus.parts.models.timm_any import timm_names, timm_tagged_names
    from hookbus.parts.models.torchvision_any import torchvision_names

    lines = []
    if not pretrained:
        own = own_backbones(pattern)
        lines.append(f"hookbus's backbones ({len(own)}):")
        width = max((len(name) for name, _ in own), default=0)
        lines += [f"  {name:<{width}}  {summary}" for name, summary in own]
        tv = _matching(torchvision_names(), pattern)
        lines.append(
            f"torchvision's classification models ({len(tv)}; {TV_PREFIX}NAME or "
            "torchvision/NAME, random init):"
        )
        lines += [f"  {TV_PREFIX}{name}" for name in tv]
    try:
        names = timm_tagged_names() if pretrained else timm_names()
    except ValueError as exc:  # timm is not installed
        lines.append(f"timm's models: {exc}")
        return lines
    found = _matching(names, pattern)
    what = (
        f"timm's pretrained weights ({len(found)}; {TIMM_PREFIX}NAME.TAG or timm/NAME.TAG, "
        "downloaded once into timm's hub cache, or model.backbone.weights for a local file)"
        if pretrained
        else f"timm's models ({len(found)}; {TIMM_PREFIX}NAME or timm/NAME, random init; "
        "--pretrained lists the tags of their weights)"
    )
    lines.append(f"{what}:")
    lines += [f"  {TIMM_PREFIX}{name}" for name in found]
    return lines

"""Backbone weights from a file: a pretraining checkpoint, an export, a state dict or
safetensors file from another library, or a foundation model's official release.

:func:`load_backbone_weights` is what ``model.backbone.weights``,
``model.linear_eval.checkpoint`` and ``model.fine_tune.checkpoint`` use. The file is read
as data (:mod:`~hookbus.parts.models.weights_file`), its keys are put in the backbone's
terms (:func:`fit_to_backbone`: a hookbus model's ``backbone.`` entries, a DDP
``module.`` prefix, and for a timm backbone timm's own conversion of its model family's
other layouts, the official DINOv2 and DINOv3 files among them), and then it must fit the
backbone exactly: a key missing, a key left over or a shape that differs is one
:class:`~hookbus.engine.errors.CheckpointError` line listing them, raised before the run
writes anything.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from torch import Tensor, nn

from hookbus.engine.errors import CheckpointError
from hookbus.parts.models.weights_file import read_weights_file

BACKBONE_PREFIX = "backbone."
"""Prefix of the backbone's keys in an SSL model's state dict."""

DDP_PREFIX = "module."
"""Prefix DistributedDataParallel puts before every key of the model it wraps."""

CLASSIFIER_KEYS = ("fc.weight", "fc.bias")
"""Keys of torchvision's classifier, which an exported ResNet carries and a backbone lacks."""

LISTED = 6
"""How many keys of each kind a mismatch names before it counts the rest."""


def backbone_state_dict(model_weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """The ``backbone.*`` entries of a model's state dict, prefix removed."""
    return {
        key.removeprefix(BACKBONE_PREFIX): value
        for key, value in model_weights.items()
        if key.startswith(BACKBONE_PREFIX)
    }


def read_backbone_weights(path: Path) -> dict[str, Tensor]:
    """The backbone weights in ``path``, keyed as a hookbus backbone's own state dict.

    ``path`` is a hookbus checkpoint (verified against its checksum file; its model's
    ``backbone.*`` entries are taken), or a state dict as ``hookbus export`` writes it
    (torchvision's ``fc.*`` dropped), or any other file that
    :func:`~hookbus.parts.models.weights_file.read_weights_file` reads.
    """
    weights = _unwrap(read_weights_file(path))
    return {key: value for key, value in weights.items() if key not in CLASSIFIER_KEYS}


def _unwrap(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    if weights and all(key.startswith(DDP_PREFIX) for key in weights):
        weights = {key.removeprefix(DDP_PREFIX): value for key, value in weights.items()}
    inner = backbone_state_dict(weights)
    return inner if inner else weights


def timm_filter(backbone: nn.Module) -> Callable[..., dict[str, Tensor]] | None:
    """timm's ``checkpoint_filter_fn`` of the module that defines ``backbone``'s class
    (the one timm applies to its own pretrained files), or None for a model that is not
    timm's or a family without one."""
    module = type(backbone).__module__
    if not module.startswith("timm."):
        return None
    return cast(
        "Callable[..., dict[str, Tensor]] | None",
        getattr(sys.modules.get(module), "checkpoint_filter_fn", None),
    )


def fit_to_backbone(weights: dict[str, Tensor], backbone: nn.Module) -> dict[str, Tensor]:
    """``weights`` keyed as ``backbone``'s state dict: the ``backbone.*`` entries of a
    whole hookbus model, without a DDP prefix, through timm's conversion for a timm
    backbone (DINOv2's and DINOv3's official layouts, a position embedding of another
    grid resampled, as timm does for its own files), an exported ResNet's ``fc.*``
    dropped (the classifiers of the other exports are dropped by the backbones' own
    load hooks)."""
    own = backbone.state_dict()
    if not any(key.startswith(BACKBONE_PREFIX) for key in own):
        weights = _unwrap(weights)
    convert = timm_filter(backbone)
    if convert is not None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # timm prints what it skips
                weights = convert(dict(weights), backbone)
        except (KeyError, RuntimeError, ValueError, AssertionError, IndexError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"timm's conversion of its keys failed: {problem}") from None
    dropped = set(CLASSIFIER_KEYS) - set(own)
    return {key: value for key, value in weights.items() if key not in dropped}


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:LISTED])
    return shown + (f" and {len(keys) - LISTED} more" if len(keys) > LISTED else "")


def _problems(missing: list[str], unexpected: list[str], shapes: list[str]) -> str | None:
    problems = []
    for keys, what in ((missing, "missing key"), (unexpected, "unexpected key")):
        if keys:
            problems.append(f"{len(keys)} {what}{'s' * (len(keys) > 1)} ({_listed(keys)})")
    if shapes:
        problems.append(f"{len(shapes)} wrong shape{'s' * (len(shapes) > 1)} ({_listed(shapes)})")
    return "; ".join(problems) or None


def load_fitted(backbone: nn.Module, weights: dict[str, Tensor]) -> str | None:
    """Load ``weights`` into ``backbone``; what kept them from fitting strictly (the
    missing keys, the unexpected keys and the first wrong shapes, in one line), or None
    when they fit. The backbone's own load hooks run (a removed classifier's keys are
    dropped there); after a mismatch the backbone holds a part of the weights."""
    own = backbone.state_dict()
    wrong = {key for key in weights if key in own and weights[key].shape != own[key].shape}
    result = backbone.load_state_dict(
        {key: value for key, value in weights.items() if key not in wrong}, strict=False
    )
    shapes = [
        f"{key} {list(weights[key].shape)} for {list(own[key].shape)}"
        for key in own
        if key in wrong
    ]
    missing = [key for key in result.missing_keys if key not in wrong]
    return _problems(missing, list(result.unexpected_keys), shapes)


def load_backbone_weights(backbone: nn.Module, path: Path, *, name: str = "") -> None:
    """Load the weights in ``path`` into ``backbone`` after :func:`fit_to_backbone`; they
    must fit exactly. Raises :class:`CheckpointError` (one line) for a file that cannot
    be read or weights that do not fit, naming the missing and unexpected keys and the
    first wrong shapes; ``name`` (the backbone's name) goes into the message."""
    which = f" {name}" if name else ""
    try:
        weights = fit_to_backbone(read_weights_file(path), backbone)
    except ValueError as exc:
        raise CheckpointError(f"weights in {path} do not fit the backbone{which}: {exc}") from None
    problem = load_fitted(backbone, weights)
    if problem is not None:
        raise CheckpointError(f"weights in {path} do not fit the backbone{which}: {problem}")

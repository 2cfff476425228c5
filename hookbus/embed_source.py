"""The encoder ``hookbus embed`` runs: the backbone of a checkpoint, of a run directory's
newest checkpoint, or of an exported state dict with the recipe that built it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from hookbus.config import Config, load_config, validate_config
from hookbus.engine.bounded_files import check_regular
from hookbus.engine.checkpoint.checkpoint_io import FORMAT, newest_valid_checkpoint
from hookbus.engine.checkpoint.sharded_checkpoint import load_whole_checkpoint
from hookbus.engine.config import BackboneConfig
from hookbus.engine.errors import CheckpointError, ConfigError
from hookbus.engine.registry import UnknownNameError
from hookbus.parts.models import BACKBONES, backbone_config
from hookbus.parts.models.build import BackboneBuilder, zero_classifier_weights
from hookbus.parts.models.pretrained import CLASSIFIER_KEYS, backbone_state_dict
from hookbus.recipes_index import resolve_recipe

IMAGE_PIPELINES = ("torchvision", "crop_first")
"""The ``data.pipeline`` values of runs trained on image files, whose config says how
the images were normalised."""


@dataclass(frozen=True)
class Encoder:
    """A trained backbone in eval mode, on the CPU, with the config of its run."""

    backbone: nn.Module
    config: Config
    source: Path


def load_encoder(
    source: str | Path, recipe: str | Path | None = None, *, require_image_files: bool = True
) -> Encoder:
    """The backbone in ``source``, its weights loaded, in eval mode.

    ``source`` is a hookbus checkpoint (verified against its checksum file, as on
    resume), a run directory (its newest valid checkpoint) or a state dict as
    ``hookbus export`` writes it. A checkpoint carries its run's config; an exported
    file does not, so ``recipe`` (a YAML recipe's path or a shipped recipe's name, such
    as the run's ``config.yaml``) says how its backbone is built; the classifier the
    export added is dropped. Every file is read with ``weights_only=True``. The run must
    have trained on image files (``data.pipeline`` torchvision or crop_first, 3
    channels), whose normalisation the config holds. Raises a
    :class:`~hookbus.engine.errors.UserError` naming what is wrong.
    ``require_image_files=False`` takes runs on data made in memory too (``hookbus eval``
    reads their images from the run's own config).
    """
    path = Path(source)
    if path.is_dir():
        found = newest_valid_checkpoint(path, hint="")
        if found is None:
            raise CheckpointError(f"no checkpoint in {path} (a run directory holds phase*.torch)")
        saved = found[1]
        path = path / found[0].name  # the directory holds it: keep the path as given
    elif not path.exists():
        raise CheckpointError(
            f"embedding source not found: {path} (give a checkpoint, a run directory or a "
            "hookbus export file)"
        )
    else:
        saved = _load(path)
    if saved.get("format") == FORMAT:
        if recipe is not None:
            raise ConfigError(
                f"{path} is a checkpoint, which carries its run's config: --recipe is for an "
                "exported backbone; remove it"
            )
        saved = load_whole_checkpoint(path)
        cfg = validate_config(saved.get("config", {}), f"the config in {path}")
        weights = backbone_state_dict(saved["model"])
        if not weights:
            raise CheckpointError(f"checkpoint {path} holds no backbone weights")
    elif recipe is None:
        raise ConfigError(
            f"{path} is an exported backbone, which does not say how it was built or how its "
            "images were normalised: give its run's recipe with --recipe (the run "
            "directory's config.yaml)"
        )
    else:
        cfg = load_config(resolve_recipe(str(recipe)))
        weights = saved
    _check_trained_on_images(cfg, path, require_image_files)
    hint = "" if recipe is None else f" ({recipe} must be the recipe that trained them)"
    return Encoder(_build(cfg, weights, path, hint), cfg, path)


def _load(path: Path) -> dict[str, Any]:
    """The dict in the file ``path`` (a regular file; its tensors mapped, not read): a
    checkpoint or a state dict of tensors."""
    check_regular(path, "embedding source", error=CheckpointError)
    if path.stat().st_size == 0:
        raise CheckpointError(f"cannot load {path}: the file is empty")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:
        reason = " ".join(str(exc).split()[:30])
        if "mmap can only be used" in reason:
            reason = "not a file torch.save wrote (truncated, or another format)"
        raise CheckpointError(f"cannot load {path}: {reason}") from None
    is_checkpoint = isinstance(loaded, dict) and loaded.get("format") == FORMAT
    if not is_checkpoint and not (
        isinstance(loaded, dict) and loaded and all(isinstance(v, Tensor) for v in loaded.values())
    ):
        raise CheckpointError(f"{path} is neither a hookbus checkpoint nor a state dict")
    return loaded


def _check_trained_on_images(cfg: Config, path: Path, require_image_files: bool = True) -> None:
    """Refuse a run whose images the config cannot reproduce from image files (with
    ``require_image_files``), or whose backbone came from Python."""
    if cfg.from_python.backbone is not None:
        raise ConfigError(
            f"the backbone of {path} came from Python ({cfg.from_python.backbone}): build it, "
            "load its weights and encode the images in Python"
        )
    if not require_image_files:
        return
    if cfg.data.pipeline not in IMAGE_PIPELINES:
        raise ConfigError(
            f"{path} was trained on in-memory tensors (data.name {cfg.data.name}, "
            f"data.pipeline {cfg.data.pipeline}), whose normalisation the config does not "
            "hold: embed takes encoders trained on image files (data.pipeline torchvision "
            "or crop_first)"
        )
    if cfg.model.backbone.in_channels != 3:
        raise ConfigError(
            f"{path}: the backbone takes {cfg.model.backbone.in_channels} channels; images "
            "are read as RGB (model.backbone.in_channels 3)"
        )


def _build(cfg: Config, weights: dict[str, Tensor], path: Path, hint: str = "") -> nn.Module:
    """The run's backbone with ``weights`` loaded strictly, in eval mode; ``hint`` ends
    the message of weights that do not fit.

    The backbone is built on the meta device where its builder allows (no memory is
    allocated and no initialisation runs: a ResNet-18's takes half a second, and every
    weight is replaced by the file's), then takes the file's tensors; a backbone with a
    buffer no state dict holds (computed at build time) is built again normally."""
    settings = backbone_config(cfg)
    try:
        build = BACKBONES.get(settings.name)
    except UnknownNameError as exc:
        raise ConfigError(f"model.backbone.name of {path}: {exc}") from None
    backbone, on_meta = _construct(build, settings)
    own = backbone.state_dict()
    try:
        added = set(zero_classifier_weights(settings, weights, 1))
    except KeyError:  # a ViT without its class token: the strict load below names it
        added = set()
    added = (added | set(CLASSIFIER_KEYS)) - set(own)
    kept = {k: v for k, v in weights.items() if k not in added}
    if on_meta:
        # assign=True keeps the file's tensors as they are: cast them as a copy would.
        kept = {
            k: v.to(own[k].dtype) if k in own and v.is_floating_point() else v
            for k, v in kept.items()
        }
    try:
        backbone.load_state_dict(kept, assign=on_meta)
        if on_meta and any(t.is_meta for t in (*backbone.parameters(), *backbone.buffers())):
            backbone = build(settings)
            backbone.load_state_dict(kept)
    except RuntimeError as exc:
        problem = " ".join(str(exc).split())[:400]
        raise CheckpointError(
            f"the weights in {path} do not fit backbone {settings.name}: {problem}{hint}"
        ) from None
    return backbone.eval()


def _construct(build: BackboneBuilder, settings: BackboneConfig) -> tuple[nn.Module, bool]:
    """The backbone ``build(settings)`` makes, on the meta device where it can be built
    there (``True`` beside it), else on the CPU (a builder that needs real tensors)."""
    try:
        with torch.device("meta"):
            return build(settings), True
    except Exception:  # built again below, where a real error surfaces as it would
        return build(settings), False

"""The patch grid of a run's views under its ViT, which I-JEPA's masks (drawn in the
collate) and its predictor (built with the model) share. It reads the backbone's name
and patch size and imports neither torchvision nor timm until a ``timm:<name>`` is named."""

from __future__ import annotations

from hookbus.parts.config import Config
from hookbus.parts.models.presets import TIMM_PREFIX, vit_sizes
from hookbus.parts.models.timm_any import timm_patch_size


def patch_grid(cfg: Config) -> tuple[int, int]:
    """The patch grid of the run's views: ``data.image_size`` over the patch side of its
    ViT (``vit_*`` with ``model.backbone.vit.patch_size``, or timm's ``timm:<name>``)."""
    name = cfg.model.backbone.name
    if name.startswith(TIMM_PREFIX):
        patch = timm_patch_size(name.removeprefix(TIMM_PREFIX))
    else:
        patch = vit_sizes(name, patch_size=cfg.model.backbone.vit.patch_size).patch_size
    side = cfg.data.image_size // patch
    return side, side

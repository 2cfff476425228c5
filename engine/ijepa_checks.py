"""The config rules of I-JEPA (``loss.name: ijepa``), checked when the root config is
validated: the parts it builds and the views it reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hookbus.engine.config import Config


def check_ijepa_parts(cfg: Config) -> None:
    """Raise ValueError when I-JEPA's parts do not fit the config.

    I-JEPA encodes one view of each image (``data.num_views`` 1, no small views) with a
    ViT named by the config (``vit_*`` or ``timm:<name>``; its patch size sizes the
    collate's masks, so a backbone from Python cannot be used), and has a predictor
    (``model.ijepa_predictor``) instead of a projection head, predictor MLP or
    prototypes. Another method's config may not set ``model.ijepa_predictor``.
    """
    model, data = cfg.model, cfg.data
    if cfg.loss.name != "ijepa":
        changed = model.ijepa_predictor.changed_keys()
        if changed:
            raise ValueError(
                f"model.ijepa_predictor.{changed[0]}: the I-JEPA predictor is built only for "
                f"loss.name ijepa, not {cfg.loss.name}; remove it"
            )
        return
    if data.num_views != 1 or data.small_views.count:
        raise ValueError(
            "loss.name ijepa predicts masked blocks of one view of each image: set "
            f"data.num_views=1 and data.small_views.count=0 (got {data.num_views} and "
            f"{data.small_views.count})"
        )
    name = model.backbone.name
    if cfg.from_python.backbone or not name.startswith(("vit_", "timm:")):
        got = (
            f"a backbone from Python ({cfg.from_python.backbone})"
            if cfg.from_python.backbone
            else name
        )
        raise ValueError(
            "loss.name ijepa predicts the patch tokens of a Vision Transformer named by the "
            f"config: model.backbone.name must be vit_tiny, vit_s16, vit_b16 or a timm ViT "
            f"(timm:<name>), not {got}"
        )
    if model.predictor.dims or model.prototypes.count:
        raise ValueError(
            "loss.name ijepa has its own predictor (model.ijepa_predictor), no predictor MLP or "
            "prototypes: set model.predictor.dims=[] and model.prototypes.count=0"
        )
    head = model.head.changed_keys()
    if head:
        raise ValueError(
            f"model.head.{head[0]}: loss.name ijepa has no projection head, so model.head is "
            "not used; remove it"
        )

"""DINOv2: iBOT's class- and patch-token self-distillation with Sinkhorn-Knopp teacher
targets, a KoLeo regulariser and layer-wise learning-rate decay."""

from __future__ import annotations

from typing import Any

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.methods.ibot import (
    centering_params,
    check_vit,
    compose_masked_distillation,
    freeze_params,
    patch_centering_params,
    teacher_params,
)
from hookbus.parts.config import Config
from hookbus.parts.settings.dinov2 import Dinov2Config

CENTER_MOMENTA = ("loss.dino.center_momentum", "loss.ibot.patch_center_momentum")
"""The settings of the running centers, which Sinkhorn-Knopp targets do not keep."""


def centered(cfg: Config) -> bool:
    """Whether DINOv2 keeps DINO's running centers (``loss.dinov2.centering`` centering)."""
    return cfg.loss.dinov2.centering == "centering"


def check_dinov2(cfg: Config) -> None:
    """DINOv2 masks a ViT's patches; under Sinkhorn-Knopp targets no center is kept, so a
    center momentum set is refused."""
    check_vit(cfg)
    if centered(cfg):
        return
    loss = cfg.loss
    changed = [f"loss.dino.{key}" for key in loss.dino.changed_keys()]
    changed += [f"loss.ibot.{key}" for key in loss.ibot.changed_keys()]
    for key in CENTER_MOMENTA:
        if key in changed:
            raise ValueError(
                f"{key} sets a running center, which loss.dinov2.centering sinkhorn_knopp "
                "does not keep: remove it, or set loss.dinov2.centering=centering"
            )


def compose_dinov2(setting: Setting, method: str = "dinov2") -> dict[str, Any]:
    """DINOv2 (and DINOv3 under it, ``method`` naming it in a refusal):
    :func:`~hookbus.methods.ibot.compose_masked_distillation` with Sinkhorn-Knopp teacher
    targets (3 iterations) and the KoLeo loss at 0.1."""
    composed = compose_masked_distillation(setting, method)
    composed["loss"]["dinov2"] = {
        "centering": "sinkhorn_knopp",
        "sinkhorn_iterations": 3,
        "koleo_weight": 0.1,
    }
    return composed


DINOV2_HOOKS = (
    MethodHook[Config](
        "momentum_teacher", teacher_params, role="teacher, on the whole global views"
    ),
    MethodHook[Config](
        "dino_centering",
        lambda cfg: centering_params(cfg, centered(cfg)),
        role="teacher temperature; a class center with centering",
    ),
    MethodHook[Config](
        "patch_centering",
        patch_centering_params,
        when=centered,
        role="with loss.dinov2.centering centering",
    ),
    MethodHook[Config]("freeze_prototypes", freeze_params, role="last layers"),
)
"""DINOv2's hooks: its teacher, the teacher temperature (and centers with
``loss.dinov2.centering`` centering), the frozen last layers. DINOv3 adds its own."""


DINOV2 = register_method(
    MethodSpec[Config](
        name="dinov2",
        title="DINOv2",
        parts=("prototypes",),
        section=Dinov2Config,
        reads=("dino", "ibot"),
        exclusive_section=True,
        hooks=DINOV2_HOOKS,
        check=check_dinov2,
        model="hookbus.parts.models.masked_distillation:build_masked_distillation",
        compose=compose_dinov2,
        order=52,
    )
)

"""DINOv2: iBOT's class- and patch-token self-distillation with Sinkhorn-Knopp teacher
targets, a KoLeo regulariser and layer-wise learning-rate decay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from hookbus.engine.methods.composition import Setting
from hookbus.engine.methods.entries import MethodHook, MethodSpec, register_method
from hookbus.engine.section import Section
from hookbus.methods.ibot import (
    centering_params,
    check_vit,
    compose_masked_distillation,
    freeze_params,
    patch_centering_params,
    teacher_params,
)

if TYPE_CHECKING:
    from hookbus.engine.config import Config

CENTER_MOMENTA = ("loss.dino.center_momentum", "loss.ibot.patch_center_momentum")
"""The settings of the running centers, which Sinkhorn-Knopp targets do not keep."""


class Dinov2Config(Section):
    """DINOv2's additions to DINO and iBOT (loss.name dinov2)."""

    centering: Literal["sinkhorn_knopp", "centering"] = Field(
        "sinkhorn_knopp",
        description="teacher targets: sinkhorn_knopp (DINOv2's recipe), or centering, "
        "DINO's running centers (loss.dino.center_momentum, "
        "loss.ibot.patch_center_momentum)",
    )
    sinkhorn_iterations: int = Field(3, ge=1, le=1000, description="Sinkhorn-Knopp iterations")
    koleo_weight: float = Field(
        0.1, ge=0, le=100, description="weight of the KoLeo loss on the global class tokens"
    )
    layer_decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="a backbone parameter at depth d (0: patch embedding, class token, "
        "position embedding, mask token; i + 1: encoder layer i; L + 1: final LayerNorm, "
        "registers, as the heads) learns at lr * layer_decay^(L + 1 - d) (DINOv2: 0.9); 1: off",
    )
    patch_embedding_lr_scale: float = Field(
        1.0,
        gt=0,
        le=1,
        description="the patch embedding's learning rate as a multiple of its layer's "
        "(DINOv2: 0.2)",
    )


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


def compose_dinov2(setting: Setting) -> dict[str, Any]:
    """DINOv2: :func:`~hookbus.methods.ibot.compose_masked_distillation` with
    Sinkhorn-Knopp teacher targets (3 iterations) and the KoLeo loss at 0.1."""
    composed = compose_masked_distillation(setting, "dinov2")
    composed["loss"]["dinov2"] = {
        "centering": "sinkhorn_knopp",
        "sinkhorn_iterations": 3,
        "koleo_weight": 0.1,
    }
    return composed


DINOV2_HOOKS = (
    MethodHook("momentum_teacher", teacher_params, role="teacher, on the whole global views"),
    MethodHook(
        "dino_centering",
        lambda cfg: centering_params(cfg, centered(cfg)),
        role="teacher temperature; a class center with centering",
    ),
    MethodHook(
        "patch_centering",
        patch_centering_params,
        when=centered,
        role="with loss.dinov2.centering centering",
    ),
    MethodHook("freeze_prototypes", freeze_params, role="last layers"),
)
"""DINOv2's hooks: its teacher, the teacher temperature (and centers with
``loss.dinov2.centering`` centering), the frozen last layers. DINOv3 adds its own."""


DINOV2 = register_method(
    MethodSpec(
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

"""The settings of DINOv2: ``loss.dinov2``. Torch-free sections, declared field by field in the
whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hookbus.engine.section import Section


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

"""The settings of iBOT: ``loss.ibot``, which DINOv2 and DINOv3 read too. Torch-free sections,
declared field by field in the whole config (:mod:`hookbus.parts.config`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from hookbus.engine.section import Decay, Section


class IbotConfig(Section):
    """iBOT's masked patch-token loss (loss.name ibot and dinov2): the student sees its
    global views with block-wise masked patches, the teacher sees them whole, and each
    masked patch token predicts the teacher's. The class-token part, the teacher and its
    temperatures are ``loss.dino``'s."""

    mask_probability: float = Field(
        0.5, ge=0, le=1, description="share of the global views that are masked"
    )
    mask_ratio: tuple[Decay, Decay] = Field(
        (0.1, 0.5),
        description="range of the share of a masked view's patches that are masked, "
        "spread evenly over the masked views of a batch",
    )
    loss_weight: float = Field(1.0, ge=0, le=100, description="weight of the patch loss")
    separate_head: bool = Field(
        False,
        description="the patch tokens get their own head (model.head's sizes) and "
        "last layer; false: they share the class token's (DINOv2's default)",
    )
    patch_prototypes: int = Field(
        0, ge=0, le=10**6, description="separate_head: outputs of the patch head's last layer"
    )
    patch_center_momentum: float = Field(
        0.9, ge=0, lt=1, description="loss.name ibot: EMA momentum of the patch center"
    )

    @model_validator(mode="after")
    def _ratios_and_head(self) -> IbotConfig:
        low, high = self.mask_ratio
        if not 0 <= low <= high <= 1:
            raise ValueError(f"mask_ratio must be [low, high] in [0, 1], got {self.mask_ratio}")
        if self.separate_head != bool(self.patch_prototypes):
            raise ValueError(
                "loss.ibot.separate_head and loss.ibot.patch_prototypes go together: a "
                "separate patch head needs its number of outputs, a shared one has none"
            )
        return self

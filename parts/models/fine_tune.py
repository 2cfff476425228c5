"""Fine-tuning: a pretrained backbone trained end to end with a linear classifier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from torch import Tensor, nn

from hookbus.parts.models.ssl_model import ModelOutput

if TYPE_CHECKING:
    from torchvision.models.vision_transformer import VisionTransformer

BACKBONE_PREFIX = "backbone."
"""Prefix of the backbone's parameter names in the fine-tuning model."""

EMBEDDING_NAMES = ("class_token", "encoder.pos_embedding")
"""A ViT's class token and position embedding: depth 0, and no weight decay."""


def vit_depths(backbone: VisionTransformer) -> dict[str, int]:
    """The depth of every parameter of a torchvision ``VisionTransformer`` (a ``vit_*``
    or ``tv:vit_*`` backbone), by name: 0 for the patch embedding (``conv_proj``), the
    class token and the position embedding, ``i + 1`` for ``encoder.layers.encoder_layer_i``
    and ``L + 1`` for the final LayerNorm ``encoder.ln`` and the register tokens (as
    DINOv2's code), with ``L`` encoder layers.

    Raises ``ValueError`` naming a parameter outside those parts (a ``heads`` layer kept
    by the backbone, say), which would otherwise get no depth.
    """
    top = len(backbone.encoder.layers) + 1
    depths = {}
    for name, _ in backbone.named_parameters():
        if name in EMBEDDING_NAMES or name.startswith("conv_proj."):
            depths[name] = 0
        elif name.startswith("encoder.layers.encoder_layer_"):
            layer = name.removeprefix("encoder.layers.encoder_layer_").split(".")[0]
            depths[name] = int(layer) + 1
        elif name.startswith("encoder.ln.") or name == "register_tokens":
            depths[name] = top
        else:
            raise ValueError(
                f"layer decay: the ViT parameter {name} is in none of conv_proj, class_token, "
                "encoder.pos_embedding, encoder.layers and encoder.ln, so it has no depth"
            )
    return depths


def _is_vit(backbone: nn.Module) -> bool:
    """Whether ``backbone`` is a torchvision ``VisionTransformer`` (asked only with layer
    decay: torchvision is imported here, not by a fine-tuning run without it)."""
    from torchvision.models.vision_transformer import VisionTransformer

    return isinstance(backbone, VisionTransformer)


class FineTuneModel(nn.Module):
    """A ``backbone`` trained end to end (in train mode, its BatchNorm statistics
    updating) and a ``classifier`` (one Linear layer from ``backbone.out_dim`` to
    ``num_classes``).

    The optimizer builder reads :meth:`lr_scales` and :meth:`no_weight_decay`: the
    classifier learns at the scheduled rate, each backbone parameter at that rate times
    ``backbone_lr_scale`` and, with ``layer_decay`` below 1 (a ViT backbone only),
    times ``layer_decay ** (L + 1 - d)`` for a parameter at depth ``d`` of
    :func:`vit_depths` (layer-wise learning-rate decay, as in BEiT and MAE fine-tuning).
    With ``feature_norm`` the features pass through a BatchNorm without affine
    parameters before the classifier, as in :class:`LinearEvalModel`.

    Raises ``ValueError`` when ``layer_decay`` is not 1 and the backbone is not a
    torchvision ``VisionTransformer``, or a scale is not positive.
    """

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        *,
        feature_norm: bool = False,
        backbone_lr_scale: float = 1.0,
        layer_decay: float = 1.0,
    ) -> None:
        super().__init__()
        if not 0 < layer_decay <= 1:
            raise ValueError(f"layer_decay must be in (0, 1], got {layer_decay}")
        if backbone_lr_scale <= 0:
            raise ValueError(f"backbone_lr_scale must be above 0, got {backbone_lr_scale}")
        if layer_decay != 1 and not _is_vit(backbone):
            raise ValueError(
                f"layer_decay {layer_decay} needs a ViT backbone (a torchvision "
                f"VisionTransformer, vit_* or tv:vit_*), not a {type(backbone).__name__}: "
                "set model.fine_tune.layer_decay=1"
            )
        self.backbone = backbone
        out_dim: int = backbone.out_dim  # type: ignore[assignment]  # set by every backbone
        self.feature_norm = nn.BatchNorm1d(out_dim, affine=False) if feature_norm else nn.Identity()
        self.classifier = nn.Linear(out_dim, num_classes)
        self.backbone_lr_scale = backbone_lr_scale
        self.layer_decay = layer_decay
        self._depths = vit_depths(backbone) if layer_decay != 1 else {}

    def forward(self, batch: dict) -> ModelOutput:
        """``{"logits": [B, num_classes], "features": [B, D]}`` of the batch's clean
        images (``batch["image"]``, as test batches have), else of its first view
        (``batch["views"][0]``, an augmented image, as train batches have)."""
        images = batch["image"] if "image" in batch else batch["views"][0]
        features = self.backbone(images)
        return {"logits": self.classifier(self.feature_norm(features)), "features": features}

    def encode(self, images: Tensor) -> Tensor:
        """Backbone features ``[B, D]`` of ``images``."""
        return self.backbone(images)

    def lr_scales(self) -> dict[str, float]:
        """The learning-rate multiplier of every parameter, by name: 1 for the classifier,
        ``backbone_lr_scale * layer_decay ** (L + 1 - d)`` for a backbone parameter at
        depth ``d`` (``backbone_lr_scale`` alone without layer decay)."""
        vit = cast(Any, self.backbone)  # with depths, a ViT (__init__ refused others)
        top = len(vit.encoder.layers) + 1 if self._depths else 0
        scales = {}
        for name, _ in self.named_parameters():
            if not name.startswith(BACKBONE_PREFIX):
                scales[name] = 1.0
                continue
            depth = self._depths.get(name.removeprefix(BACKBONE_PREFIX), top)
            scales[name] = self.backbone_lr_scale * self.layer_decay ** (top - depth)
        return scales

    def no_weight_decay(self) -> set[str]:
        """Names of the parameters kept out of weight decay besides biases and norm
        weights: a ViT's class token and position embedding."""
        names = {name for name, _ in self.named_parameters()}
        return {BACKBONE_PREFIX + name for name in EMBEDDING_NAMES} & names

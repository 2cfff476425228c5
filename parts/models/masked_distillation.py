"""The model of iBOT and DINOv2: a ViT whose masked global views predict the teacher's
class and patch tokens (Zhou et al., "iBOT", 2022; Oquab et al., "DINOv2", 2024)."""

from __future__ import annotations

from itertools import groupby
from typing import cast

import torch
from torch import Tensor, nn

from hookbus.parts.config import Config
from hookbus.parts.models.fine_tune import vit_depths
from hookbus.parts.models.heads import MLPHead, Prototypes
from hookbus.parts.models.ibot_masks import draw_batch_masks
from hookbus.parts.models.ssl_model import ModelOutput
from hookbus.parts.models.ssl_parts import ssl_parts
from hookbus.parts.models.timm_masked import TimmMaskedTokens, is_timm_token_vit, timm_vit_depths
from hookbus.parts.models.vit import ViTBackbone

TEACHER_MASKS = "patch_masks"
"""The batch key that makes a forward the teacher's: the student's masks, which the
momentum teacher passes on, say where the targets of the patch loss are."""


class MaskedDistillationModel(nn.Module):
    """A ViT ``backbone`` (hookbus's :class:`ViTBackbone`, or timm's ``VisionTransformer``
    or ``Eva`` masked through :class:`~hookbus.parts.models.timm_masked.TimmMaskedTokens`),
    the class-token head (``head`` then ``prototypes``, DINO's)
    and the patch-token head: its own (``patch_head``, ``patch_prototypes``) or, when
    those are None, the class-token head shared (DINOv2's default, iBOT's too).

    The student's forward, ``batch["views"]`` with the ``global_views`` global views
    first (of one size): masks ``[G * B, N]`` are drawn for the global views
    (:func:`~hookbus.parts.models.ibot_masks.draw_batch_masks`, ``mask_probability``,
    ``mask_ratio``), the masked patches' embeddings replaced by ``mask_token`` (zeros at
    first) and the global views encoded together; the other views are encoded whole,
    once per run of views of one size (the heads read the class token of every view).
    Output: per view ``"view_features"`` (class
    token), ``"embeddings"`` and ``"scores"``; ``"patch_masks"`` (the masks, bool),
    ``"patch_tokens"`` ``[G * B, N, width]`` (the global views' patch tokens after the
    final LayerNorm, masked ones included: DINOv3's Gram loss reads them, and its Gram
    teacher's forward gives them too) and
    ``"patch_scores"`` ``[M, K']``, the patch head on the ``M`` masked patch tokens in
    mask order (image by image, patches row by row).

    The teacher's forward, with ``batch["patch_masks"]`` (the student's masks): the
    views (the global ones) encoded whole; ``"scores"`` per view and ``"patch_scores"``
    at the masked places. With ``batch["image"]``: ``"features"``, the class token of
    the clean images, as :class:`SSLModel` gives them.
    """

    def __init__(
        self,
        backbone: nn.Module,
        head: nn.Module,
        prototypes: nn.Module,
        *,
        patch_head: nn.Module | None = None,
        patch_prototypes: nn.Module | None = None,
        global_views: int = 2,
        mask_probability: float = 0.5,
        mask_ratio: tuple[float, float] = (0.1, 0.5),
        layer_decay: float = 1.0,
        patch_embedding_lr_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if (patch_head is None) != (patch_prototypes is None):
            raise ValueError("a separate patch head needs both patch_head and patch_prototypes")
        self.backbone = backbone
        self.head = head
        self.prototypes = prototypes
        self.patch_head = patch_head
        self.patch_prototypes = patch_prototypes
        self.mask_token = nn.Parameter(torch.zeros(cast(int, backbone.out_dim)))
        self.global_views = global_views
        self.mask_probability = mask_probability
        self.mask_ratio = mask_ratio
        self.layer_decay = layer_decay
        self.patch_embedding_lr_scale = patch_embedding_lr_scale

    def encoder(self) -> ViTBackbone | TimmMaskedTokens:
        """What gives the backbone's class and patch tokens, masked or not: hookbus's ViT
        itself, or the adapter of timm's (made on each call from the backbone it has, so
        a copy of the model reads its own)."""
        if isinstance(self.backbone, ViTBackbone):
            return self.backbone
        return TimmMaskedTokens(self.backbone)

    def patch_scores(self, tokens: Tensor) -> Tensor:
        """The patch head's scores ``[M, K']`` of patch tokens ``[M, width]``. With no
        masked patch the head runs on no rows (its BatchNorm leaves its statistics and
        its parameters get a zero gradient): every rank runs the same modules whatever
        it masked, which DDP's gradient reduction and FSDP's gathers need."""
        head, prototypes = self.head, self.prototypes
        if self.patch_head is not None and self.patch_prototypes is not None:
            head, prototypes = self.patch_head, self.patch_prototypes
        return prototypes(head(tokens))

    def forward(self, batch: dict) -> ModelOutput:
        """The outputs of a batch dict (see the class)."""
        if "views" not in batch and "image" not in batch:
            raise KeyError("MaskedDistillationModel needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = list(batch["views"])
            if len(views) < self.global_views:
                raise ValueError(
                    f"{self.global_views} global views are masked, got {len(views)} views"
                )
            output.update(self._views(views, batch.get(TEACHER_MASKS)))
        if "image" in batch:
            output["features"] = self.backbone(batch["image"])
        return output

    def _views(self, views: list[Tensor], teacher_masks: Tensor | None) -> ModelOutput:
        global_views = views[: self.global_views]
        if len({view.shape for view in global_views}) != 1:
            raise ValueError("the global views of iBOT and DINOv2 must have one size")
        images = torch.cat(global_views)
        encoder = self.encoder()
        patch = encoder.patch_size
        rows, cols = images.shape[-2] // patch, images.shape[-1] // patch
        if teacher_masks is None:
            masks = draw_batch_masks(
                len(images), rows, cols, self.mask_probability, self.mask_ratio, images.device
            )
            cls, patches = encoder.tokens(images, masks, self.mask_token)
        else:
            masks = teacher_masks
            cls, patches = encoder.tokens(images)
        features = [cls] + [
            encoder.tokens(torch.cat(list(group)))[0]
            for _, group in groupby(views[self.global_views :], key=lambda view: view.shape[-2:])
        ]
        features_all = torch.cat(features)
        sizes = [len(view) for view in views]
        embeddings = self.head(features_all)
        output: ModelOutput = {
            "view_features": list(features_all.split(sizes)),
            "embeddings": list(embeddings.split(sizes)),
            "scores": list(self.prototypes(embeddings).split(sizes)),
            "patch_scores": self.patch_scores(patches[masks]),
        }
        output["patch_tokens"] = patches
        if teacher_masks is None:
            output[TEACHER_MASKS] = masks
        return output

    def encode(self, images: Tensor) -> Tensor:
        """Backbone features ``[B, D]`` (the class token) of ``images``."""
        return self.backbone(images)

    def lr_scales(self) -> dict[str, float]:
        """The learning-rate multiplier of each parameter, by name (DINOv2's pre-training
        groups): ``layer_decay ** (L + 1 - d)`` for a backbone parameter at depth ``d``
        (:func:`~hookbus.parts.models.fine_tune.vit_depths`) and for the mask token
        (depth 0), times ``patch_embedding_lr_scale`` for the patch embedding; the heads
        learn at the scheduled rate. Empty when both are 1. timm's ViTs take their depths
        from timm's own grouping (:func:`~hookbus.parts.models.timm_masked.timm_vit_depths`),
        their patch embedding is ``patch_embed``."""
        if self.layer_decay == 1 and self.patch_embedding_lr_scale == 1:
            return {}
        if isinstance(self.backbone, ViTBackbone):
            depths, patch_embedding = vit_depths(self.backbone), "conv_proj."
        else:
            depths, patch_embedding = timm_vit_depths(self.backbone), "patch_embed."
        top = max(depths.values())
        scales = {"mask_token": self.layer_decay**top}
        for name, depth in depths.items():
            scale = self.layer_decay ** (top - depth)
            if name.startswith(patch_embedding):
                scale *= self.patch_embedding_lr_scale
            scales[f"backbone.{name}"] = scale
        return scales

    def no_weight_decay(self) -> set[str]:
        """No matrix is kept out of weight decay (biases, norms and the mask token, which
        is a vector, are left out by the optimizer's rule)."""
        return set()


def build_masked_distillation(
    cfg: Config, backbone: nn.Module, name: str | None
) -> MaskedDistillationModel:
    """The :class:`MaskedDistillationModel` of ``cfg`` (``loss.ibot``,
    ``loss.dino.global_views``, ``loss.dinov2``'s learning-rate multipliers) on
    ``backbone`` (named ``name`` in messages), which must be a :class:`ViTBackbone` or
    timm's ``VisionTransformer`` or ``Eva``,
    with the class-token head and prototypes of the SSL model (``model.head``,
    ``model.prototypes``: :func:`~hookbus.parts.models.ssl_parts.ssl_parts`); with
    ``loss.ibot.separate_head`` a patch head of the same sizes and
    ``loss.ibot.patch_prototypes`` outputs. DINOv2's and iBOT's model builder
    (``MethodSpec.model``)."""
    if not isinstance(backbone, ViTBackbone) and not is_timm_token_vit(backbone):
        raise ValueError(
            f"loss.name {cfg.loss.name} masks the patches of a Vision Transformer (vit_tiny, "
            f"vit_s16, vit_b16, or timm's ViTs): {name!r} is a {type(backbone).__name__}"
        )
    head, _, prototypes = ssl_parts(cfg, backbone, name)
    if prototypes is None:  # the entries need prototypes: validation refuses none
        raise ValueError(f"loss.name {cfg.loss.name} needs model.prototypes.count")
    ibot, model = cfg.loss.ibot, cfg.model
    patch_head = patch_prototypes = None
    if ibot.separate_head:
        width = cast(int, backbone.out_dim)
        dims = [width if size == "backbone" else size for size in model.head.dims]
        patch_head = MLPHead(
            dims,
            model.head.batch_norm,
            model.head.output_batch_norm,
            hidden_bias=model.head.hidden_bias,
            activation=model.head.activation,
        )
        patch_prototypes = Prototypes(dims[-1], ibot.patch_prototypes, model.prototypes.weight_norm)
    return MaskedDistillationModel(
        backbone,
        head,
        prototypes,
        patch_head=patch_head,
        patch_prototypes=patch_prototypes,
        global_views=cfg.loss.dino.global_views,
        mask_probability=ibot.mask_probability,
        mask_ratio=(ibot.mask_ratio[0], ibot.mask_ratio[1]),
        layer_decay=cfg.loss.dinov2.layer_decay,
        patch_embedding_lr_scale=cfg.loss.dinov2.patch_embedding_lr_scale,
    )

"""I-JEPA (Assran et al., "Self-Supervised Learning from Images with a Joint-Embedding
Predictive Architecture", 2023): a ViT encodes a context block of each image's patches,
and a narrow predictor ViT predicts, from the context's tokens and the positions of the
target blocks, the target encoder's tokens of those blocks. The target encoder is a
momentum copy of this model (the momentum teacher hook), which encodes the whole image.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hookbus.parts.config import Config
from hookbus.parts.models.patch_grid import patch_grid
from hookbus.parts.models.ssl_model import ModelOutput
from hookbus.parts.models.timm_any import TimmViTTokens, is_timm_vit
from hookbus.parts.models.token_transformer import TokenTransformer
from hookbus.parts.models.vit import ViTBackbone, sincos_position_embedding


def patch_tokens(backbone: nn.Module, images: Tensor, keep: Tensor | None = None) -> Tensor:
    """The patch tokens ``[B, N, D]`` of ``images`` after the encoder's final norm, or
    with ``keep`` ``[B, K]`` those of the kept patches encoded without the others
    (``[B, K, D]``), from a :class:`ViTBackbone` or timm's ViT (its class token takes part
    and is left out)."""
    if isinstance(backbone, ViTBackbone):
        if keep is None:
            return backbone.tokens(images)[1]
        return backbone.visible_tokens(images, keep)[:, 1:]
    return TimmViTTokens(backbone).patch_tokens(images, keep)


class JepaPredictor(TokenTransformer):
    """I-JEPA's predictor: a narrow ViT from the context tokens to the target tokens.

    The context tokens ``[B, Kc, D]`` are projected to ``width`` and given the fixed 2-D
    sine-cosine position embedding (:func:`sincos_position_embedding`, not trained) of
    their patches; for each of the ``M`` target blocks, one learned mask token per
    target patch, plus that patch's position embedding, is appended; ``depth``
    torchvision ``EncoderBlock`` layers and a LayerNorm run over each (context, block)
    sequence, and the mask tokens' outputs are projected back to ``D``:
    ``[B, M, Kt, D]``. The linear layers and the mask token start from a truncated
    normal of std 0.02, the biases at zero.
    """

    position: Tensor  # the fixed position embedding, a buffer

    def __init__(
        self,
        encoder_width: int,
        grid: tuple[int, int],
        *,
        width: int = 384,
        depth: int = 12,
        heads: int = 12,
        mlp_dim: int | None = None,
    ) -> None:
        super().__init__(
            encoder_width, grid, width=width, depth=depth, heads=heads, mlp_dim=mlp_dim
        )
        self.project = nn.Linear(width, encoder_width)
        # A function of the sizes, rebuilt with the module: not part of the state dict.
        position = sincos_position_embedding(width, *grid)[0, 1:]
        self.register_buffer("position", position, persistent=False)
        nn.init.trunc_normal_(self.mask_token, std=0.02)
        for linear in (self.embed, self.project):
            nn.init.trunc_normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, context: Tensor, context_keep: Tensor, target_keep: Tensor) -> Tensor:
        """The predicted tokens ``[B, M, Kt, D]`` of the target blocks ``target_keep``
        ``[B, M, Kt]`` from the ``context`` tokens ``[B, Kc, D]`` of the patches
        ``context_keep`` ``[B, Kc]``."""
        batch, blocks, count = target_keep.shape
        x = self.embed(context) + self.position[context_keep]
        x = x.repeat_interleave(blocks, dim=0)
        queries = self.mask_token.to(x.dtype) + self.position[target_keep.reshape(-1, count)]
        x = self.transform(torch.cat([x, queries], dim=1))
        return self.project(x[:, -count:]).reshape(batch, blocks, count, -1)


class JepaModel(nn.Module):
    """I-JEPA as an SSL model: the context encoder ``backbone`` (a ViT: exported,
    evaluated) and the ``predictor``.

    ``forward(batch)`` with ``batch["views"]`` (exactly one view ``[B, C, H, W]``) and the
    collate's masks ``"context_keep"`` ``[B, Kc]`` and ``"target_keep"`` ``[B, M, Kt]``
    (:class:`~hookbus.parts.data.ijepa_masks.BlockMaskCollate`): the backbone encodes the
    context patches only and the predictor predicts the target blocks' tokens:
    ``"predictions"`` ``[B, M, Kt, D]``, and ``"view_features"`` (the mean context token,
    one entry). Without the masks (the target encoder's call from the momentum teacher
    hook): ``"embeddings"``, the patch tokens of the whole view ``[B, N, D]`` (one entry).
    With ``batch["image"]``: ``"features"``, :meth:`encode` of the clean images.
    """

    def __init__(self, backbone: nn.Module, predictor: JepaPredictor) -> None:
        super().__init__()
        self.backbone = backbone
        self.predictor = predictor

    def forward(self, batch: dict) -> ModelOutput:
        """The outputs of a batch dict (see the class)."""
        if "views" not in batch and "image" not in batch:
            raise KeyError("JepaModel needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = batch["views"]
            if len(views) != 1:
                raise ValueError(
                    f"I-JEPA encodes one view per image, got {len(views)} (data.num_views 1)"
                )
            if "context_keep" in batch:
                context = patch_tokens(self.backbone, views[0], batch["context_keep"])
                output["predictions"] = self.predictor(
                    context, batch["context_keep"], batch["target_keep"]
                )
                output["view_features"] = [context.mean(dim=1)]
            else:
                output["embeddings"] = [patch_tokens(self.backbone, views[0])]
        if "image" in batch:
            output["features"] = self.encode(batch["image"])
        return output

    def encode(self, images: Tensor) -> Tensor:
        """Features ``[B, D]`` of ``images``: the mean of the backbone's patch tokens, as
        the paper evaluates its encoders."""
        return patch_tokens(self.backbone, images).mean(dim=1)


def build_jepa_model(cfg: Config, backbone: nn.Module, name: str | None) -> JepaModel:
    """The :class:`JepaModel` of ``cfg`` (``model.ijepa_predictor``) on ``backbone``
    (named ``name`` in messages): a :class:`ViTBackbone` or timm's ViT, ``ValueError``
    otherwise. The predictor's grid is that of the views
    (:func:`~hookbus.parts.models.patch_grid.patch_grid`)."""
    if not isinstance(backbone, ViTBackbone) and not is_timm_vit(backbone):
        raise ValueError(
            f"loss.name ijepa needs a ViT backbone (vit_tiny, vit_s16, vit_b16, a timm ViT): "
            f"{name!r} is a {type(backbone).__name__}"
        )
    predictor_cfg = cfg.model.ijepa_predictor
    width: int = backbone.out_dim  # type: ignore[assignment]  # set by every backbone
    predictor = JepaPredictor(
        width,
        patch_grid(cfg),
        width=predictor_cfg.width,
        depth=predictor_cfg.depth,
        heads=predictor_cfg.heads,
        mlp_dim=predictor_cfg.mlp_dim,
    )
    return JepaModel(backbone, predictor)

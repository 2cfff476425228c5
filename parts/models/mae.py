"""The masked autoencoder (MAE, He et al., "Masked Autoencoders Are Scalable Vision
Learners", 2022): a ViT encodes a random subset of each image's patches, a light decoder
predicts the pixels of all of them from the encoded ones and mask tokens."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor, nn

from hookbus.parts.config import Config
from hookbus.parts.models.drop_path import global_batch_noise
from hookbus.parts.models.ssl_model import ModelOutput
from hookbus.parts.models.timm_any import TimmViTTokens, is_timm_vit
from hookbus.parts.models.token_transformer import TokenTransformer
from hookbus.parts.models.vit import ViTBackbone, sincos_position_embedding


def kept_patches(num_patches: int, mask_ratio: float) -> int:
    """How many of ``num_patches`` patches each image keeps visible:
    ``int((1 - mask_ratio) * num_patches)``, rounded down in floating point as the
    authors' code (196 patches at ratio 0.9 keep 19); ``ValueError`` unless at least one
    patch is kept and one masked."""
    keep = int((1 - mask_ratio) * num_patches)
    if not 0 < keep < num_patches:
        raise ValueError(
            f"loss.mae.mask_ratio {mask_ratio} keeps {keep} of the {num_patches} patches of "
            "an image: at least one patch must stay visible and one be masked"
        )
    return keep


def mask_noise(batch: int, num_patches: int, device: torch.device | str) -> Tensor:
    """Uniform noise ``[batch, num_patches]`` from torch's global generator (that of
    ``device``), whose state every checkpoint carries.

    With several processes each draws the noise of the whole global batch and keeps its
    own rows: the ranks' generators stay in step (same seed, same draws) while their
    masks differ.
    """
    return global_batch_noise(batch, num_patches, device=device)


def random_masking(noise: Tensor, keep_count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The random masking of MAE from per-patch ``noise`` ``[B, N]``.

    Each image's patches are sorted by their noise; the first ``keep_count`` stay
    visible. Returns ``keep`` ``[B, keep_count]`` (indices of the visible patches, in
    that order), ``mask`` ``[B, N]`` (1.0 for a masked patch, 0.0 for a visible one) and
    ``restore`` ``[B, N]``, the permutation that puts the visible tokens followed by
    the mask tokens back into patch order.
    """
    shuffle = torch.argsort(noise, dim=1, stable=True)
    restore = torch.argsort(shuffle, dim=1, stable=True)
    keep = shuffle[:, :keep_count]
    mask = torch.ones_like(noise)
    mask[:, :keep_count] = 0
    return keep, torch.gather(mask, 1, restore), restore


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """The pixels of each patch of ``images`` ``[B, C, H, W]``: ``[B, N, patch_size^2 * C]``,
    patches row by row, each patch's pixels row by row with the channels last. Sides
    that are not a multiple of the patch size lose their last partial patch, as in the
    ViT's patch embedding."""
    batch, channels, height, width = images.shape
    grid_h, grid_w = height // patch_size, width // patch_size
    x = images[:, :, : grid_h * patch_size, : grid_w * patch_size]
    x = x.reshape(batch, channels, grid_h, patch_size, grid_w, patch_size)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(batch, grid_h * grid_w, -1)


class MaeDecoder(TokenTransformer):
    """MAE's decoder: from the encoder's tokens of the visible patches to pixels.

    The encoder's tokens ``[B, 1 + K, encoder_width]`` (class token first) are projected
    to ``width``; a learned mask token fills the places of the masked patches, the
    tokens are put back into patch order, the fixed sine-cosine position embedding
    (:func:`sincos_position_embedding`, not trained) is added, and ``depth``
    torchvision ``EncoderBlock`` layers and a LayerNorm run; a linear layer then
    predicts the ``patch_pixels`` values of every patch: ``[B, N, patch_pixels]``.
    """

    position: Tensor
    """The position embedding of the patch grid ``[1, 1 + N, width]`` (a buffer)."""

    def __init__(
        self,
        encoder_width: int,
        patch_pixels: int,
        grid: tuple[int, int],
        *,
        width: int = 512,
        depth: int = 8,
        heads: int = 16,
        mlp_dim: int | None = None,
    ) -> None:
        super().__init__(
            encoder_width, grid, width=width, depth=depth, heads=heads, mlp_dim=mlp_dim
        )
        self.predict = nn.Linear(width, patch_pixels)
        # A function of the sizes, rebuilt with the module: not part of the state dict.
        self.register_buffer("position", sincos_position_embedding(width, *grid), persistent=False)
        nn.init.normal_(self.mask_token, std=0.02)
        for linear in (self.embed, self.predict):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, tokens: Tensor, restore: Tensor, grid: tuple[int, int]) -> Tensor:
        """Pixels ``[B, N, patch_pixels]`` of the ``N = grid_h * grid_w`` patches from the
        encoder's ``tokens`` and the ``restore`` permutation of :func:`random_masking`."""
        x = self.embed(tokens)
        batch, visible, width = x.shape
        masked = self.mask_token.expand(batch, restore.shape[1] + 1 - visible, -1)
        patches = torch.cat([x[:, 1:], masked.to(x.dtype)], dim=1)
        patches = torch.gather(patches, 1, restore.unsqueeze(-1).expand(-1, -1, width))
        position = (
            self.position
            if tuple(grid) == tuple(self.grid)
            else sincos_position_embedding(width, *grid).to(x.device)
        )
        x = torch.cat([x[:, :1], patches], dim=1) + position
        return self.predict(self.transform(x))[:, 1:]


def visible_tokens(backbone: nn.Module, images: Tensor, keep: Tensor) -> Tensor:
    """The class token and the tokens of the ``keep`` ``[B, K]`` patches of ``images``,
    encoded without the others (``[B, 1 + K, D]``), by a :class:`ViTBackbone` or timm's
    ViT (:meth:`~hookbus.parts.models.timm_any.TimmViTTokens.visible_tokens`)."""
    if isinstance(backbone, ViTBackbone):
        return backbone.visible_tokens(images, keep)
    return TimmViTTokens(backbone).visible_tokens(images, keep)


def patch_side(backbone: nn.Module) -> int:
    """The patch side of a :class:`ViTBackbone` or of timm's ViT."""
    if isinstance(backbone, ViTBackbone):
        return backbone.patch_size
    return TimmViTTokens(backbone).patch_size


class MaskedAutoencoder(nn.Module):
    """MAE as an SSL model: the ViT ``backbone`` (hookbus's or timm's; exported,
    evaluated) and a ``decoder``.

    ``forward(batch)`` with ``batch["views"]`` (exactly one view ``[B, C, H, W]``): each
    image keeps ``int((1 - mask_ratio) * N)`` of its ``N`` patches, chosen by uniform
    noise from torch's global generator (:func:`mask_noise`); the backbone encodes those
    only (:func:`visible_tokens`) and the decoder predicts every patch. The
    output holds ``"reconstruction"`` ``[B, N, P]``, ``"target_patches"`` (the view's
    pixels, :func:`patchify`, ``[B, N, P]``), ``"mask"`` ``[B, N]`` (1.0 masked) and
    ``"view_features"`` (the class token of the visible patches, one entry). With
    ``batch["image"]``: ``"features"``, the backbone's features of the whole clean
    images (its class token; timm's: its own pooling), as :class:`SSLModel` gives them.
    """

    def __init__(self, backbone: nn.Module, decoder: MaeDecoder, mask_ratio: float) -> None:
        super().__init__()
        self.backbone = backbone
        self.decoder = decoder
        self.mask_ratio = mask_ratio

    def forward(self, batch: dict) -> ModelOutput:
        """The outputs of a batch dict (see the class)."""
        if "views" not in batch and "image" not in batch:
            raise KeyError("MaskedAutoencoder needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = batch["views"]
            if len(views) != 1:
                raise ValueError(
                    f"MAE reconstructs one view per image, got {len(views)} (data.num_views 1)"
                )
            images = views[0]
            patch = patch_side(self.backbone)
            grid = (images.shape[-2] // patch, images.shape[-1] // patch)
            num_patches = grid[0] * grid[1]
            noise = mask_noise(len(images), num_patches, images.device)
            keep, mask, restore = random_masking(noise, kept_patches(num_patches, self.mask_ratio))
            tokens = visible_tokens(self.backbone, images, keep)
            output["reconstruction"] = self.decoder(tokens, restore, grid)
            output["target_patches"] = patchify(images, patch)
            output["mask"] = mask
            output["view_features"] = [tokens[:, 0]]
        if "image" in batch:
            output["features"] = self.backbone(batch["image"])
        return output

    def encode(self, images: Tensor) -> Tensor:
        """Backbone features ``[B, D]`` of ``images`` (the class token; timm's: its own
        pooling)."""
        return self.backbone(images)


def build_masked_autoencoder(
    cfg: Config, backbone: nn.Module, name: str | None
) -> MaskedAutoencoder:
    """The :class:`MaskedAutoencoder` of ``cfg`` (``model.mae_decoder``,
    ``loss.mae.mask_ratio``) on ``backbone`` (named ``name`` in messages), a
    :class:`ViTBackbone` or timm's ViT (the decoder's grid: ``data.image_size`` over its
    patch side); ``ValueError`` otherwise, or when the mask ratio keeps no patch or masks
    none of the grid."""
    if isinstance(backbone, ViTBackbone):
        grid = (backbone.image_size // backbone.patch_size,) * 2
        channels = backbone.conv_proj.in_channels
    elif is_timm_vit(backbone):
        grid = (cfg.data.image_size // patch_side(backbone),) * 2
        channels = cast(Any, backbone).patch_embed.proj.in_channels
    else:
        raise ValueError(
            f"loss.name mae needs a ViT backbone (vit_tiny, vit_s16, vit_b16, a timm "
            f"VisionTransformer): {name!r} is a {type(backbone).__name__}"
        )
    kept_patches(grid[0] * grid[1], cfg.loss.mae.mask_ratio)
    decoder_cfg = cfg.model.mae_decoder
    patch = patch_side(backbone)
    width: int = backbone.out_dim  # type: ignore[assignment]  # set by every backbone
    decoder = MaeDecoder(
        width,
        patch**2 * channels,
        grid,
        width=decoder_cfg.width,
        depth=decoder_cfg.depth,
        heads=decoder_cfg.heads,
        mlp_dim=decoder_cfg.mlp_dim,
    )
    return MaskedAutoencoder(backbone, decoder, cfg.loss.mae.mask_ratio)

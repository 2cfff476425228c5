"""Vision Transformer backbones on torchvision's ``VisionTransformer`` (random init).

The backbone keeps torchvision's module layout, so its ``state_dict`` keys are those of
``torchvision.models.vision_transformer.VisionTransformer`` minus the classifier
(``heads.head.*``): ``hookbus export`` adds a zero classifier back and the file loads
strictly into torchvision's class built with the same sizes.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal, cast

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torchvision.models.vision_transformer import EncoderBlock, VisionTransformer

from hookbus.parts.models.drop_path import DropPathBlock, DropPathRule, drop_path_rates
from hookbus.parts.models.layer_scale import LayerScaleBlock
from hookbus.parts.models.presets import ViTSizes
from hookbus.parts.models.rope import RopeAttention, rope_periods, rope_sin_cos, use_rope

CLASSIFIER_PREFIX = "heads.head."
"""Keys of torchvision's classifier, which an exported ViT carries and the backbone lacks."""

PositionEmbedding = Literal["learned", "sincos", "rope"]
"""The encoder's position embedding: torchvision's learned one, the fixed 2-D
sine-cosine table of MoCo v3 and MAE, or DINOv3's rotary embedding in the attention."""

PatchEmbeddingInit = Literal["torchvision", "xavier_uniform"]
ClassTokenInit = Literal["zeros", "normal"]
"""The patch embedding's init: torchvision's truncated normal over the fan-in, or Xavier
uniform over the kernel seen as a Linear layer (MoCo v3, MAE)."""


def sincos_position_embedding(width: int, grid_h: int, grid_w: int) -> Tensor:
    """Fixed 2-D sine-cosine position embedding ``[1, 1 + grid_h * grid_w, width]``.

    A zero row for the class token, then one row per patch (row by row): a quarter of
    the width holds ``sin`` and a quarter ``cos`` of the patch's row index times the
    frequencies ``10000^(-k / (width / 4))``, ``k = 0 .. width / 4 - 1``, and the other
    half the same of its column index. ``width`` must be a multiple of 4. The row half
    comes first, as in MoCo v3's table; MAE's puts the column half first, a fixed
    permutation of the channels that a network trained from its random init cannot tell
    from this one.
    """
    if width % 4:
        raise ValueError(
            f"the sine-cosine position embedding needs a width divisible by 4: {width}"
        )
    quarter = width // 4
    frequencies = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(grid_h, dtype=torch.float64),
        torch.arange(grid_w, dtype=torch.float64),
        indexing="ij",
    )
    row_angles = rows.reshape(-1, 1) * frequencies
    col_angles = cols.reshape(-1, 1) * frequencies
    grid = torch.cat(
        [row_angles.sin(), row_angles.cos(), col_angles.sin(), col_angles.cos()], dim=1
    )
    return torch.cat([grid.new_zeros(1, width), grid]).float().unsqueeze(0)


class ViTBackbone(VisionTransformer):
    """torchvision's ``VisionTransformer`` without its classifier, for any image size.

    ``forward`` maps images ``[B, in_channels, H, W]`` to the class token after the final
    LayerNorm, ``[B, width]`` (``out_dim`` = width); :meth:`tokens` gives the patch tokens
    too. The position embedding is built for ``image_size`` and resized (bicubic) for
    other sizes, e.g. the small views of multi-crop; sides that are not a multiple of the
    patch size lose their last partial patch. ``in_channels`` other than 3 replaces the
    patch-embedding convolution ``conv_proj``. Loading a state dict drops torchvision's
    classifier (``heads.head.*``), so an exported file loads back, and takes the grid of
    a saved position embedding made for another image size. With
    ``freeze_patch_embedding`` the patch embedding ``conv_proj`` keeps its random init
    (its parameters do not require gradients, so no optimizer updates them): MoCo v3's
    random patch projection.

    ``position_embedding="sincos"`` fills ``encoder.pos_embedding`` with the fixed 2-D
    sine-cosine table of :func:`sincos_position_embedding` (a zero row for the class
    token) and freezes it: it stays a parameter under torchvision's key, so checkpoints
    and exports keep it and torchvision's class loads it, but no gradient or optimizer
    touches it (other grids interpolate it as they would a learned one). The width must
    be a multiple of 4. ``patch_embedding_init="xavier_uniform"`` draws ``conv_proj``'s
    kernel from Xavier's uniform distribution over the kernel seen as a Linear layer,
    ``U(-a, a)`` with ``a = sqrt(6 / (in_channels * patch_size^2 + width))``, and zeroes
    its bias (MoCo v3, MAE); torchvision's truncated normal otherwise.
    ``class_token_init="normal"`` draws the class token from a normal of std 0.02 (MAE);
    torchvision's starts it at zero. ``registers`` above 0 adds that many register
    tokens (Darcet et al., "Vision Transformers Need Registers", 2024): learned tokens
    (``register_tokens`` ``[1, R, width]``, drawn from a normal of std 1e-6) put between
    the class token and the patch tokens after the position embedding is added, with no
    position embedding of their own, and dropped from every output; torchvision's class
    has none, so such a backbone does not export to it. With ``class_token`` false the
    backbone has no class token (I-JEPA's ViT): the class row of the position embedding
    is kept (unused; zero in the sine-cosine table), the encoder sees the patch tokens
    (and registers) only, and the "class token" of every output is the mean of the patch
    tokens after the final LayerNorm; such a backbone does not export to torchvision's
    class either. ``position_embedding="rope"`` drops the position embedding
    (``encoder.pos_embedding`` is None) and rotates, in every block's attention, the
    queries and keys of the patch tokens by their grid coordinates (DINOv3's RoPE:
    :mod:`hookbus.parts.models.rope`, periods from ``rope_base``; in training the
    coordinates are jittered by ``rope_jitter`` per axis and ``rope_rescale`` for both);
    the blocks keep torchvision's keys, the class token and registers are not rotated,
    and only whole grids are encoded (:meth:`tokens`). ``drop_path`` above
    0 drops each block's branches per sample in training (stochastic depth,
    :class:`~hookbus.parts.models.drop_path.DropPathBlock`), at a rate rising linearly to
    ``drop_path`` at the last block (``drop_path_rule="linear"``) or at ``drop_path`` in
    every block (``"uniform"``); the weights and keys are those of the plain blocks.
    ``layer_scale`` (a float above 0) scales each block's attention and MLP branch by a
    learned vector starting at that value
    (:class:`~hookbus.parts.models.layer_scale.LayerScaleBlock`): the other weights are
    those of the backbone without it, and each block gains the keys ``layer_scale_1`` and
    ``layer_scale_2``, which an export folds into the branches' last linear layers.
    """

    def __init__(
        self,
        sizes: ViTSizes,
        *,
        in_channels: int = 3,
        freeze_patch_embedding: bool = False,
        position_embedding: PositionEmbedding = "learned",
        patch_embedding_init: PatchEmbeddingInit = "torchvision",
        class_token_init: ClassTokenInit = "zeros",
        drop_path: float = 0.0,
        drop_path_rule: DropPathRule = "linear",
        layer_scale: float | None = None,
        registers: int = 0,
        class_token: bool = True,
        rope_base: float = 100.0,
        rope_jitter: float | None = None,
        rope_rescale: float | None = None,
    ) -> None:
        if registers < 0:
            raise ValueError(f"registers must be 0 or more: {registers}")
        if sizes.image_size % sizes.patch_size:
            raise ValueError(
                f"the image size {sizes.image_size} is not a multiple of the patch size "
                f"{sizes.patch_size}"
            )
        if sizes.width % sizes.heads:
            raise ValueError(f"{sizes.heads} heads do not divide the width {sizes.width}")
        if position_embedding not in ("learned", "sincos", "rope"):
            raise ValueError(
                f"position_embedding must be learned, sincos or rope: {position_embedding!r}"
            )
        if class_token_init not in ("zeros", "normal"):
            raise ValueError(f"class_token_init must be zeros or normal: {class_token_init!r}")
        if patch_embedding_init not in ("torchvision", "xavier_uniform"):
            raise ValueError(
                f"patch_embedding_init must be torchvision or xavier_uniform: "
                f"{patch_embedding_init!r}"
            )
        super().__init__(
            image_size=sizes.image_size,
            patch_size=sizes.patch_size,
            num_layers=sizes.depth,
            num_heads=sizes.heads,
            hidden_dim=sizes.width,
            mlp_dim=sizes.mlp_dim,
        )
        self.sizes = sizes
        self.out_dim = sizes.width
        if in_channels != 3:
            conv = nn.Conv2d(
                in_channels, sizes.width, kernel_size=sizes.patch_size, stride=sizes.patch_size
            )
            # torchvision's init of the patch embedding: truncated normal over the fan-in.
            fan_in = in_channels * sizes.patch_size**2
            nn.init.trunc_normal_(conv.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(cast(Tensor, conv.bias))  # made with a bias
            self.conv_proj = conv
        self.heads = nn.Identity()
        if patch_embedding_init == "xavier_uniform":
            # As a Linear layer from a patch's pixels to the width: [width, C * p * p].
            nn.init.xavier_uniform_(self.conv_proj.weight.view(sizes.width, -1))
            nn.init.zeros_(cast(Tensor, self.conv_proj.bias))  # torchvision's has a bias
        if class_token_init == "normal":
            nn.init.normal_(self.class_token, std=0.02)
        if freeze_patch_embedding:
            self.conv_proj.requires_grad_(False)
        if position_embedding == "sincos":
            side = sizes.image_size // sizes.patch_size
            with torch.no_grad():
                self.encoder.pos_embedding.copy_(sincos_position_embedding(sizes.width, side, side))
            self.encoder.pos_embedding.requires_grad_(False)
        if drop_path or layer_scale is not None:
            rates = drop_path_rates(drop_path, sizes.depth, drop_path_rule)
            _replace_blocks(self.encoder.layers, rates, layer_scale)
        if not class_token:
            self.register_parameter("class_token", None)
        self.rope_base, self.rope_jitter, self.rope_rescale = rope_base, rope_jitter, rope_rescale
        if position_embedding == "rope":
            rope_periods(sizes.width // sizes.heads, rope_base)  # checks the head width
            self.encoder.register_parameter("pos_embedding", None)
            use_rope(self.encoder.layers)
        self.registers = registers
        if registers:
            self.register_tokens = nn.Parameter(torch.empty(1, registers, sizes.width))
            nn.init.normal_(self.register_tokens, std=1e-6)

    def position_embedding(self, grid_h: int, grid_w: int) -> Tensor | None:
        """The position embedding ``[1, 1 + grid_h * grid_w, width]`` for a patch grid
        (None with RoPE, which the attention applies)."""
        stored = self.encoder.pos_embedding
        if stored is None:
            return None
        side = self.image_size // self.patch_size
        if (grid_h, grid_w) == (side, side):
            return stored
        cls, grid = stored[:, :1], stored[:, 1:]
        grid = grid.reshape(1, side, side, -1).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(grid_h, grid_w), mode="bicubic", align_corners=False)
        return torch.cat([cls, grid.flatten(2).transpose(1, 2)], dim=1)

    def tokens(
        self, images: Tensor, masks: Tensor | None = None, mask_token: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The class token ``[B, width]`` and the patch tokens ``[B, N, width]`` of
        ``images`` after the final LayerNorm (``N`` patches, row by row).

        With ``masks`` ``[B, N]`` (True: masked) the embedding of each masked patch is
        replaced by ``mask_token`` ``[width]`` before the position embedding is added
        (iBOT's and DINOv2's masked student); the other patches are encoded as without.
        """
        x = self.conv_proj(images)
        grid_h, grid_w = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)
        if masks is not None:
            if mask_token is None:
                raise ValueError("tokens: masks need a mask_token to put in their place")
            x = torch.where(masks.unsqueeze(-1), mask_token.to(x.dtype), x)
        return self._encode(x, self.position_embedding(grid_h, grid_w), (grid_h, grid_w))

    def _set_rope(self, rows: int, cols: int) -> None:
        # One rotation for every block, computed on the CPU (jittered in training, from
        # the global generator) once per forward and moved to the blocks' device.
        training = self.training
        sin, cos = rope_sin_cos(
            rows,
            cols,
            rope_periods(self.sizes.width // self.sizes.heads, self.rope_base),
            jitter=self.rope_jitter if training else None,
            rescale=self.rope_rescale if training else None,
        )
        device = self.conv_proj.weight.device
        rope = (sin.to(device, non_blocking=True), cos.to(device, non_blocking=True))
        for block in self.encoder.layers:
            cast(RopeAttention, block.self_attention).rope = rope

    def _encode(
        self, x: Tensor, position: Tensor | None, grid: tuple[int, int] = (0, 0)
    ) -> tuple[Tensor, Tensor]:
        # Patch embeddings [B, N, width] and the position embedding [1, 1 + N, width]
        # (None: RoPE on the patch grid): the class token (if any) and the registers put
        # in front, the encoder run; the class token and the patch tokens after the
        # final LayerNorm.
        if position is None:
            self._set_rope(*grid)
        else:
            x = x + position[:, 1:]
        if self.class_token is not None:
            cls = self.class_token if position is None else self.class_token + position[:, :1]
            x = torch.cat([cls.expand(len(x), -1, -1), x], dim=1)
        x = self.encoder.ln(self.encoder.layers(self.encoder.dropout(self._with_registers(x))))
        patches = x[:, self.prefix_tokens :]
        return (x[:, 0] if self.class_token is not None else patches.mean(dim=1)), patches

    @property
    def prefix_tokens(self) -> int:
        """The tokens before the patch tokens in the encoder: the class token (if any)
        and the registers."""
        return int(self.class_token is not None) + self.registers

    def _with_registers(self, x: Tensor) -> Tensor:
        # The register tokens go after the class token, with no position embedding.
        if not self.registers:
            return x
        registers = self.register_tokens.expand(len(x), -1, -1).to(x.dtype)
        first = int(self.class_token is not None)
        return torch.cat([x[:, :first], registers, x[:, first:]], dim=1)

    def visible_tokens(self, images: Tensor, keep: Tensor) -> Tensor:
        """The encoder's output on the patches ``keep`` only (MAE's encoder).

        ``keep`` ``[B, K]`` holds, per image, the indices (row by row) of the patches to
        encode. The patches are embedded and given their position embedding, the others
        dropped, the class token (with its own position embedding) prepended, and the
        result ``[B, 1 + K, width]`` runs through torchvision's encoder layers and final
        LayerNorm (the register tokens, if any, run along and are dropped from the
        output): with every index, in order, it equals :meth:`tokens`.
        """
        x = self.conv_proj(images)
        _, width, grid_h, grid_w = x.shape
        position = self.position_embedding(grid_h, grid_w)
        if position is None:
            raise ValueError(
                "a ViT with position_embedding rope encodes whole grids only (tokens), not "
                "a subset of its patches (MAE's and I-JEPA's encoders)"
            )
        x = torch.gather(x.flatten(2).transpose(1, 2), 1, keep.unsqueeze(-1).expand(-1, -1, width))
        kept = torch.gather(
            position[:, 1:].expand(len(x), -1, -1), 1, keep.unsqueeze(-1).expand(-1, -1, width)
        )
        cls, patches = self._encode(
            x, torch.cat([position[:, :1].expand(len(x), -1, -1), kept], dim=1)
        )
        return torch.cat([cls.unsqueeze(1), patches], dim=1)

    def forward(self, images: Tensor) -> Tensor:
        """The class token after the final LayerNorm, ``[B, width]``."""
        return self.tokens(images)[0]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        saved = state_dict.get(prefix + "encoder.pos_embedding")
        if isinstance(saved, Tensor) and saved.dim() == 3:
            self._adopt_position_grid(saved)
        # An exported file carries a zero classifier for torchvision; the backbone has none.
        for key in [key for key in state_dict if key.startswith(prefix + CLASSIFIER_PREFIX)]:
            del state_dict[key]
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _adopt_position_grid(self, saved: Tensor) -> None:
        # Weights trained at another image size (a backbone built from a BackboneConfig
        # without image_size, say) bring their own grid: take its size before loading.
        own = self.encoder.pos_embedding
        side = math.isqrt(saved.shape[1] - 1)
        if saved.shape == own.shape or saved.shape != (1, side * side + 1, own.shape[2]):
            return
        self.encoder.pos_embedding = nn.Parameter(
            torch.empty_like(saved, device=own.device), requires_grad=own.requires_grad
        )
        self.image_size = side * self.patch_size
        self.sizes = replace(self.sizes, image_size=self.image_size)


def _replace_blocks(layers: nn.Sequential, rates: list[float], layer_scale: float | None) -> None:
    # Each EncoderBlock becomes a DropPathBlock at its rate (a LayerScaleBlock with a
    # layer_scale), with the same weights; the global generator is left as it was, so
    # the weights are those of the model built without either.
    for (name, child), rate in zip(list(layers.named_children()), rates, strict=True):
        block = cast(EncoderBlock, child)
        sizes = (block.num_heads, block.ln_1.normalized_shape[0], block.mlp[0].out_features)
        with torch.random.fork_rng(devices=[]):
            replacement = (
                DropPathBlock(*sizes, rate)
                if layer_scale is None
                else LayerScaleBlock(*sizes, rate, layer_scale)
            )
        replacement.load_state_dict({**replacement.state_dict(), **block.state_dict()})
        setattr(layers, name, replacement)


def torchvision_vit(sizes: ViTSizes, *, in_channels: int = 3, num_classes: int = 1000) -> nn.Module:
    """torchvision's ``VisionTransformer`` with ``sizes`` (and a ``conv_proj`` for
    ``in_channels``): the module an exported ViT backbone loads into strictly."""
    net = VisionTransformer(
        image_size=sizes.image_size,
        patch_size=sizes.patch_size,
        num_layers=sizes.depth,
        num_heads=sizes.heads,
        hidden_dim=sizes.width,
        mlp_dim=sizes.mlp_dim,
        num_classes=num_classes,
    )
    if in_channels != 3:
        net.conv_proj = nn.Conv2d(
            in_channels, sizes.width, kernel_size=sizes.patch_size, stride=sizes.patch_size
        )
    return net

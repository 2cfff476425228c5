"""timm's Vision Transformers as the masked student of iBOT, DINOv2 and DINOv3.

timm's ``VisionTransformer`` (DINOv2's ViTs: ``vit_small_patch14_reg4_dinov2``, with
registers and a learned position embedding) and timm's ``Eva`` (DINOv3's ViTs:
``vit_small_patch16_dinov3``, with registers and rotary position embeddings) run here
through timm's own ``forward_features`` (``patch_embed``, ``_pos_embed``, ``norm_pre``,
``blocks``, ``norm``), with one step added: a forward hook on ``patch_embed``, there for
the call only, replaces the embedding of each masked patch by the mask token, before the
position embedding, the class token and the registers join (iBOT's masking, as the
authors' code does it). Unmasked, the tokens are those of ``forward_features``. The
module stays timm's, so a run continued from a DINOv2 or DINOv3 weights file keeps
timm's keys and exports as every timm backbone; and ``forward_features`` is a method a
sharded backbone (``distributed.strategy: fsdp``) gathers its parameters for.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor, nn

from hookbus.parts.models.presets import TIMM_PREFIX
from hookbus.parts.models.timm_any import check_timm_name, timm_meta_model


def is_timm_token_vit(net: nn.Module) -> bool:
    """Whether ``net`` is timm's ``VisionTransformer`` or ``Eva`` (timm imported only if
    installed), the two classes whose patches :class:`TimmMaskedTokens` masks."""
    try:
        from timm.models.eva import Eva
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:
        return False
    return isinstance(net, VisionTransformer | Eva)


class TimmMaskedTokens:
    """The class token and the patch tokens of timm's ViT ``net`` (see the module), with
    the masked patches' embeddings replaced by a mask token: the same contract as
    :meth:`~hookbus.parts.models.vit.ViTBackbone.tokens`.

    ``net`` is read on every call, never copied: the momentum teacher's copy of a model
    gets its own tokens from its own backbone.
    """

    def __init__(self, net: nn.Module) -> None:
        if not is_timm_token_vit(net):
            raise ValueError(
                f"masking needs timm's VisionTransformer or Eva, not a {type(net).__name__}"
            )
        # timm's classes: their attributes are not typed on nn.Module.
        self.net: Any = cast(Any, net)
        patch = self.net.patch_embed.patch_size
        self.patch_size: int = patch[0] if isinstance(patch, tuple) else patch

    def tokens(
        self, images: Tensor, masks: Tensor | None = None, mask_token: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The class token ``[B, width]`` and the patch tokens ``[B, N, width]`` of
        ``images`` after timm's final norm (``N`` patches row by row; the class token and
        the registers left out of the patch tokens). With ``masks`` ``[B, N]`` (True:
        masked) each masked patch's embedding is ``mask_token`` ``[width]`` before the
        position embedding. A model without a class token gives the mean patch token."""
        net = self.net
        handle = None
        if masks is not None:
            if mask_token is None:
                raise ValueError("tokens: masks need a mask_token to put in their place")
            handle = net.patch_embed.register_forward_hook(_masking(masks, mask_token))
        try:
            x = net.forward_features(images)
        finally:
            if handle is not None:
                handle.remove()
        prefix = net.num_prefix_tokens
        patches = x[:, prefix:]
        has_class = getattr(net, "cls_token", None) is not None
        return (x[:, 0] if has_class else patches.mean(dim=1)), patches


def _masking(masks: Tensor, token: Tensor) -> Any:
    """A forward hook for timm's ``patch_embed``: its output with the embedding of each
    masked patch (``masks`` ``[B, N]``, True: masked) replaced by ``token``."""

    def masked(module: nn.Module, args: Any, x: Tensor) -> Tensor:
        flat = x.reshape(len(x), -1, x.shape[-1])  # NHWC (dynamic size) or NLC
        flat = torch.where(masks.unsqueeze(-1), token.to(flat.dtype), flat)
        return flat.reshape(x.shape)

    return masked


def timm_vit_depths(net: nn.Module) -> dict[str, int]:
    """The depth of every parameter of timm's ViT ``net`` by name, as
    :func:`~hookbus.parts.models.fine_tune.vit_depths` gives them for hookbus's ViT: 0
    for the stem of timm's own grouping for layer decay (``group_matcher``: the patch
    embedding, the class token, the position embedding), ``i + 1`` for ``blocks.i`` and
    ``L + 1`` for the register tokens, the final norm and anything after it, with ``L``
    blocks (timm's grouping puts the final norm with the last block and the registers in
    the stem; hookbus keeps DINOv2's depths whichever ViT it trains)."""
    from timm.models import group_parameters

    timm_net = cast(Any, net)
    top = len(timm_net.blocks) + 1
    layers = group_parameters(net, timm_net.group_matcher(coarse=False), reverse=True)
    depths = {}
    for name, layer in layers.items():
        if name.startswith("blocks."):
            depths[name] = int(name.split(".")[1]) + 1
        elif layer == 0 and name != "reg_token":
            depths[name] = 0
        else:
            depths[name] = top
    return depths


def timm_token_vit_patch_size(model: str) -> int:
    """The patch side of timm's ViT ``model`` (built on the meta device, no weights);
    ``ValueError`` when ``model`` is neither timm's ``VisionTransformer`` nor ``Eva``."""
    check_timm_name(model)
    net = timm_meta_model(model)
    if not is_timm_token_vit(net):
        raise ValueError(
            f"{TIMM_PREFIX}{model} is a {type(net).__name__}, not timm's VisionTransformer "
            "or Eva, whose patches the method masks"
        )
    return TimmMaskedTokens(net).patch_size

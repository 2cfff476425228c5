"""Activation checkpointing of ViT blocks (``model.backbone.vit.activation_checkpointing``).

Each encoder block of a ViT backbone keeps only its input for backward and recomputes its
activations there (PyTorch's composable ``checkpoint``): the activation memory of a
block's attention and MLP is spent once per block instead of for every block at once,
for about a third more compute. The random draws of a block (drop path) are replayed
exactly in the recomputation, the parameter names stay as they are (checkpoints and
exports do not change), and it works with DDP and with FSDP (applied before sharding).
"""

from __future__ import annotations

from torch import nn
from torch.distributed._composable import checkpoint


def checkpoint_vit_blocks(model: nn.Module) -> int:
    """Checkpoint every encoder block of every ViT in ``model`` (modules with a
    ``class_token`` and an ``encoder.layers`` sequence, as torchvision's and hookbus's
    ViTs); returns how many blocks."""
    count = 0
    for module in list(model.modules()):
        layers = getattr(getattr(module, "encoder", None), "layers", None)
        if hasattr(module, "class_token") and isinstance(layers, nn.Sequential):
            for block in layers:
                checkpoint(block)
                count += 1
    return count

"""The self-supervised model: a backbone (encoder) and a projection head."""

from __future__ import annotations

import torch
from torch import Tensor, nn

ModelOutput = dict[str, Tensor | list[Tensor]]
"""``{"embeddings": [...], "view_features": [...], "features": Tensor}``."""


class SSLModel(nn.Module):
    """Encode the views of a batch with ``backbone`` and project them with ``head``.

    ``backbone`` maps images ``[B, C, S, S]`` to features ``[B, D]`` and has an
    ``out_dim`` attribute (``D``); ``head`` maps ``[B, D]`` to embeddings.
    """

    def __init__(self, backbone: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, batch: dict) -> ModelOutput:
        """The outputs of a batch dict.

        With ``batch["views"]`` (a list of ``[B, C, S, S]``): the backbone runs once on
        all views concatenated (so BatchNorm sees them together), the head on its
        features; ``"embeddings"`` and ``"view_features"`` are the per-view head
        outputs and backbone features. With ``batch["image"]``: ``"features"`` are the
        backbone features of the clean images.
        """
        if "views" not in batch and "image" not in batch:
            raise KeyError("SSLModel needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = batch["views"]
            sizes = [len(view) for view in views]
            features = self.backbone(torch.cat(views))
            embeddings = self.head(features)
            output["embeddings"] = list(embeddings.split(sizes))
            output["view_features"] = list(features.split(sizes))
        if "image" in batch:
            output["features"] = self.backbone(batch["image"])
        return output

    def encode(self, images: Tensor) -> Tensor:
        """Backbone features ``[B, D]`` of ``images``."""
        return self.backbone(images)

"""The self-supervised model: a backbone (encoder), a projection head and optional parts."""

from __future__ import annotations

from itertools import groupby

import torch
from torch import Tensor, nn

ModelOutput = dict[str, Tensor | list[Tensor]]
"""``{"embeddings": [...], "view_features": [...], "features": Tensor, ...}``."""


class SSLModel(nn.Module):
    """Encode the views of a batch with ``backbone`` and project them with ``head``.

    ``backbone`` maps images ``[B, C, S, S]`` to features ``[B, D]`` and has an
    ``out_dim`` attribute (``D``); ``head`` maps ``[B, D]`` to embeddings. Two optional
    parts read the embeddings: ``predictor`` (BYOL's prediction MLP) and ``prototypes``
    (SwAV's and DINO's last layer, :class:`hookbus.parts.models.Prototypes`).
    """

    def __init__(
        self,
        backbone: nn.Module,
        head: nn.Module,
        predictor: nn.Module | None = None,
        prototypes: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head
        self.predictor = predictor
        self.prototypes = prototypes

    def forward(self, batch: dict) -> ModelOutput:
        """The outputs of a batch dict.

        With ``batch["views"]`` (a list of ``[B, C, S, S]``): the backbone runs once per
        run of consecutive views of the same size (once in all when every view has the
        same size, so that BatchNorm sees them together; once for the large and once for
        the small views of a multi-crop batch), the head once on all features. Per view:
        ``"view_features"`` (backbone), ``"embeddings"`` (head), ``"predictions"``
        (predictor) and ``"scores"`` (prototypes) when the model has those parts. With
        ``batch["image"]``: ``"features"`` are the backbone features of the clean images.
        """
        if "views" not in batch and "image" not in batch:
            raise KeyError("SSLModel needs a batch with 'views' and/or 'image'")
        output: ModelOutput = {}
        if "views" in batch:
            views = batch["views"]
            sizes = [len(view) for view in views]
            features = torch.cat(
                [
                    self.backbone(torch.cat(list(group)))
                    for _, group in groupby(views, key=lambda view: view.shape[-2:])
                ]
            )
            embeddings = self.head(features)
            output["view_features"] = list(features.split(sizes))
            output["embeddings"] = list(embeddings.split(sizes))
            if self.predictor is not None:
                output["predictions"] = list(self.predictor(embeddings).split(sizes))
            if self.prototypes is not None:
                output["scores"] = list(self.prototypes(embeddings).split(sizes))
        if "image" in batch:
            output["features"] = self.backbone(batch["image"])
        return output

    def encode(self, images: Tensor) -> Tensor:
        """Backbone features ``[B, D]`` of ``images``."""
        return self.backbone(images)

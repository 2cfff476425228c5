"""Linear evaluation: a linear classifier trained on a frozen backbone."""

from __future__ import annotations

from torch import Tensor, nn

from hookbus.parts.models.ssl_model import ModelOutput


class LinearEvalModel(nn.Module):
    """A frozen ``backbone`` (no gradients, always in eval mode) and a trainable
    ``classifier`` (one Linear layer from ``backbone.out_dim`` to ``num_classes``).

    The optimizer sees only the classifier (the backbone's parameters do not require
    gradients) and the backbone's BatchNorm statistics stay as loaded. With
    ``feature_norm`` (the default), the features pass through a BatchNorm without
    affine parameters first (``feature_norm``, batch statistics in training, running
    ones in test phases): every feature dimension reaches the classifier at unit scale,
    so one learning rate suits any backbone, a randomly initialised one included, whose
    raw features can be orders of magnitude smaller than a trained one's.
    """

    def __init__(self, backbone: nn.Module, num_classes: int, *, feature_norm: bool = True) -> None:
        super().__init__()
        self.backbone = backbone.requires_grad_(False)
        out_dim: int = backbone.out_dim  # type: ignore[assignment]  # set by every backbone
        self.feature_norm = nn.BatchNorm1d(out_dim, affine=False) if feature_norm else nn.Identity()
        self.classifier = nn.Linear(out_dim, num_classes)
        self.backbone.eval()

    def train(self, mode: bool = True) -> LinearEvalModel:
        """Set the classifier's (and feature norm's) mode; the backbone stays in eval mode."""
        super().train(mode)
        self.backbone.eval()
        return self

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

"""Small models and batches for the method-hook tests."""

from __future__ import annotations

import torch

from hookbus.parts.models import MLPHead, Prototypes, SmallCNN, SSLModel


def small_model(*, predictor: bool = False, prototypes: int = 0, seed: int = 0) -> SSLModel:
    """A width-2 CNN (8 features), a 8-8-4 head, optionally a predictor and prototypes."""
    torch.manual_seed(seed)
    return SSLModel(
        SmallCNN(width=2),
        MLPHead([8, 8, 4], batch_norm=True),
        MLPHead([4, 8, 4], batch_norm=True) if predictor else None,
        Prototypes(4, prototypes) if prototypes else None,
    )


def views_batch(views: int = 2, size: int = 4, seed: int = 1) -> dict:
    """A batch of ``views`` views of ``size`` 1x8x8 images."""
    generator = torch.Generator().manual_seed(seed)
    return {"views": [torch.randn(size, 1, 8, 8, generator=generator) for _ in range(views)]}

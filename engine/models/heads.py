"""Projection heads put on top of the backbone features."""

from __future__ import annotations

from itertools import pairwise

from torch import Tensor, nn


class MLPHead(nn.Module):
    """Linear layers between consecutive ``dims``; each hidden layer is followed by
    BatchNorm1d (when ``batch_norm``) and ReLU, the last layer is a plain Linear."""

    def __init__(self, dims: list[int], batch_norm: bool) -> None:
        super().__init__()
        if len(dims) < 2:
            raise ValueError(f"MLPHead needs at least an input and an output size, got {dims}")
        layers: list[nn.Module] = []
        for index, (size_in, size_out) in enumerate(pairwise(dims)):
            layers.append(nn.Linear(size_in, size_out))
            if index < len(dims) - 2:
                if batch_norm:
                    layers.append(nn.BatchNorm1d(size_out))
                layers.append(nn.ReLU(inplace=True))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: Tensor) -> Tensor:
        """Project ``[B, dims[0]]`` to ``[B, dims[-1]]``."""
        return self.layers(features)

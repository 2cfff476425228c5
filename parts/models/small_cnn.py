"""A small convolutional encoder for low-resolution grey images such as the digits."""

from __future__ import annotations

from torch import Tensor, nn


def _conv_block(in_channels: int, out_channels: int) -> list[nn.Module]:
    """3x3 convolution (no bias, padding 1), BatchNorm and ReLU."""
    return [
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]


class SmallCNN(nn.Module):
    """Four conv blocks, widths ``w, 2w, 4w, 4w`` with 2x max-pooling after the 2nd and
    3rd, then global average pooling: ``[B, in_channels, S, S] -> [B, 4w]``.

    With ``width=32`` it has 240,608 parameters.
    """

    def __init__(self, in_channels: int = 1, width: int = 32) -> None:
        super().__init__()
        self.out_dim = 4 * width
        self.layers = nn.Sequential(
            *_conv_block(in_channels, width),
            *_conv_block(width, 2 * width),
            nn.MaxPool2d(2),
            *_conv_block(2 * width, 4 * width),
            nn.MaxPool2d(2),
            *_conv_block(4 * width, 4 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )

    def forward(self, images: Tensor) -> Tensor:
        """Flat features ``[B, out_dim]`` of ``images``."""
        return self.layers(images)

"""torchvision ResNets as backbones: the classifier dropped, pooled features out."""

from __future__ import annotations

from torch import nn
from torchvision.models import resnet18, resnet50
from torchvision.models.resnet import ResNet

RESNETS = {"resnet18": resnet18, "resnet50": resnet50}
"""The torchvision builders of the ResNet backbones, by backbone name."""


def build_resnet(
    name: str, *, in_channels: int = 3, small_stem: bool = False, zero_init_residual: bool = False
) -> ResNet:
    """torchvision's ``name`` (random init) with ``fc`` replaced by the identity.

    It maps ``[B, in_channels, S, S]`` to the pooled features ``[B, out_dim]`` (512 for
    ResNet-18, 2048 for ResNet-50) and its ``state_dict`` keys are torchvision's, minus
    ``fc.*``. ``small_stem`` replaces the 7x7 stride-2 first convolution and the max-pool
    by a 3x3 stride-1 convolution, for images of 32-64 pixels; ``in_channels`` other
    than 3 changes the first convolution too. ``zero_init_residual`` starts the last
    BatchNorm of every residual block at a zero scale, so that each block starts as the
    identity (torchvision's option; MoCo v3 and SimSiam train so).
    """
    if name not in RESNETS:
        raise ValueError(f"unknown ResNet {name!r}; known: {', '.join(sorted(RESNETS))}")
    net = RESNETS[name](zero_init_residual=zero_init_residual)
    net.out_dim = net.fc.in_features
    net.fc = nn.Identity()
    stem_out = net.conv1.out_channels
    if small_stem:
        net.conv1 = nn.Conv2d(in_channels, stem_out, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    elif in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, stem_out, kernel_size=7, stride=2, padding=3, bias=False)
    return net

"""Stochastic depth ("drop path") for the blocks of torchvision's ViT, and the per-sample
noise of a global batch that it and MAE's masking draw."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor
from torchvision.models.vision_transformer import EncoderBlock

from hookbus.engine.process import distributed

DropPathRule = Literal["linear", "uniform"]
"""How a drop path rate spreads over the blocks: rising linearly from 0 at the first block
to the rate at the last (stochastic depth's rule), or the rate at every block."""


def global_batch_noise(batch: int, *shape: int, device: torch.device | str) -> Tensor:
    """Uniform noise ``[batch, *shape]`` from torch's global generator (that of
    ``device``), whose state every checkpoint carries.

    With several processes each draws the noise of the whole global batch and keeps its
    own rows: the ranks' generators stay in step (same seed, same draws) while their rows
    differ, and together they are one process's draw on the global batch.
    """
    rank, world = distributed.rank(), distributed.world_size()
    noise = torch.rand(world * batch, *shape, device=device)
    return noise[rank * batch : (rank + 1) * batch]


def drop_paths(branch: Tensor, rate: float) -> Tensor:
    """``branch`` ``[B, ...]`` with each sample's rows zeroed with probability ``rate`` and
    the others scaled by ``1 / (1 - rate)``, so that its expectation is ``branch``."""
    keep = 1.0 - rate
    noise = global_batch_noise(len(branch), device=branch.device)
    scale = (noise < keep).to(branch.dtype) / keep
    return branch * scale.view(-1, *([1] * (branch.dim() - 1)))


class DropPathBlock(EncoderBlock):
    """torchvision's ``EncoderBlock`` whose attention and MLP branches are each dropped per
    sample with probability ``rate`` (:func:`drop_paths`) in train mode while gradients
    are recorded; otherwise it is the plain block. The same modules and state-dict keys:
    a file saved from one loads into the other.

    A forward without gradients never drops, so a momentum teacher (a copy of the model
    run under ``torch.no_grad``) sees every block, as DINO's teacher does.
    """

    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, rate: float) -> None:
        super().__init__(num_heads, hidden_dim, mlp_dim, dropout=0.0, attention_dropout=0.0)
        if not 0 <= rate < 1:
            raise ValueError(f"the drop path rate must be in [0, 1), got {rate}")
        self.rate = rate

    def attention_branch(self, input: Tensor) -> Tensor:
        """The attention branch on tokens ``[B, N, width]``, before the residual sum."""
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        return self.dropout(x)

    def mlp_branch(self, x: Tensor) -> Tensor:
        """The MLP branch on tokens ``[B, N, width]``, before the residual sum."""
        return self.mlp(self.ln_2(x))

    def forward(self, input: Tensor) -> Tensor:
        """The block on tokens ``[B, N, width]``, its branches dropped per sample."""
        dropping = self.training and self.rate > 0 and torch.is_grad_enabled()
        x = self.attention_branch(input)
        x = (drop_paths(x, self.rate) if dropping else x) + input
        y = self.mlp_branch(x)
        return x + (drop_paths(y, self.rate) if dropping else y)


def drop_path_rates(rate: float, depth: int, rule: DropPathRule = "linear") -> list[float]:
    """The drop path rate of each of ``depth`` blocks: ``rate * i / (depth - 1)`` at block
    ``i`` for ``linear`` (0 at the first block, ``rate`` at the last; ``[0.0]`` for one
    block), ``rate`` at every block for ``uniform``."""
    if rule == "uniform":
        return [rate] * depth
    if rule != "linear":
        raise ValueError(f"the drop path rule must be linear or uniform, got {rule!r}")
    return [rate * index / max(1, depth - 1) for index in range(depth)]
